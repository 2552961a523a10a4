// examples/feature_trainer_cuda.cu — train_demo's feature drafters on the GPU: DeviceFeatureDrafter<CudaDevice>
// beside the target as a CudaModel (feature_trainer.hpp says what each piece does).
#include <cuda_bf16.h>

#include <memory>
#include <string>
#include <vector>

#include "feature_trainer.hpp"
#include "specdec.hpp"

namespace feature_training {

using namespace specdec;
using namespace specdec::train;

CudaContext& cuda_context() {
    static CudaContext ctx;  // device 0, created on first use
    return ctx;
}

namespace {

class CudaFeatureTrainer final : public FeatureTrainer {
public:
    CudaFeatureTrainer(const FeatureCheckpoint& init, const std::vector<std::string>& frozen, float weight_decay)
        : dev_(cuda_context()),
          model_(dev_, init, frozen),
          layer_opt_(dev_, model_.layer().tensors(), feature_adamw(weight_decay)),
          connector_opt_(dev_, model_.connector(), feature_adamw(weight_decay)) {}

    FeatureLoss step(const FeatureBatch& b, double token_weight, double clip, float lr) override {
        model_.zero_grad();
        const FeatureLoss loss = model_.forward_loss(b, token_weight, true);
        model_.clip_gradients(clip);
        layer_opt_.step(lr);
        connector_opt_.step(lr);
        return loss;
    }
    FeatureLoss evaluate(const FeatureBatch& b, double token_weight, double& top1) override {
        const FeatureLoss loss = model_.forward_loss(b, token_weight, false);
        top1 = model_.top1_agreement(b);
        return loss;
    }
    FeatureCheckpoint checkpoint() const override { return model_.checkpoint(); }
    double product_flops() const override { return dev_.gemm_flops(); }

private:
    CudaDevice dev_;
    DeviceFeatureDrafter<CudaDevice> model_;
    DeviceAdamW<CudaDevice> layer_opt_, connector_opt_;
};

}  // namespace

std::unique_ptr<FeatureTrainer> cuda_feature_trainer(const FeatureCheckpoint& init, const std::vector<std::string>& frozen,
                                                     float weight_decay) {
    return std::make_unique<CudaFeatureTrainer>(init, frozen, weight_decay);
}

Teacher cuda_teacher(const Checkpoint& target, int max_window, ThreadPool& pool, int layer) {
    auto model = std::make_shared<CudaModel>(target.config, target.weights, cuda_context(),
                                             CudaModelOptions{.max_tree_nodes = max_window, .max_context = max_window});
    if (layer < 0) layer = target.config.num_hidden_layers;  // the feature: the final normed state
    return [model, layer, &pool](const WindowBatch& w) { return hidden_teacher(*model, pool, layer, w); };
}

GpuInfo cuda_info() {
    CudaContext& ctx = cuda_context();
    // y (n, m) = x (n, k) · Wᵀ at n = m = k = 8192, bf16 in, fp32 out: the rate the drafter's products can
    // reach. Random operands: tensor cores draw less power on zeros and may clock higher on them.
    constexpr int n = 8192;
    const std::size_t count = static_cast<std::size_t>(n) * n;
    DeviceBuffer<__nv_bfloat16> x = detail::random_bf16(count, 1, 0, 1.0f), W = detail::random_bf16(count, 2, 0, 1.0f);
    DeviceBuffer<float> y(count);
    SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());  // random_bf16 fills on the default stream
    Gemm gemm(ctx);
    gemm(y.get(), x.get(), W.get(), n, n, n);  // plan and warm-up
    cudaEvent_t start = nullptr, stop = nullptr;
    SPECDEC_CUDA_CHECK(cudaEventCreate(&start));
    SPECDEC_CUDA_CHECK(cudaEventCreate(&stop));
    constexpr int reps = 10;
    SPECDEC_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
    for (int r = 0; r < reps; ++r) gemm(y.get(), x.get(), W.get(), n, n, n);
    SPECDEC_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
    SPECDEC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    SPECDEC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return {ctx.properties().name, 2.0 * n * n * double(n) * reps / (ms * 1e-3) / 1e12};
}

}  // namespace feature_training

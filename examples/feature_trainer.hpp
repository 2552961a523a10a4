// examples/feature_trainer.hpp — an EAGLE/FSPAD drafter's training steps and its teacher, on the CPU or the GPU (train_demo --device).
//
// train_demo's feature loop is written once against FeatureTrainer (zero the gradients, forward and
// backward, clip, AdamW) and a teacher (the frozen target's features and laws for a batch of windows).
// The CPU pair is TrainableFeatureDrafter beside a CpuModel, the reference; the CUDA pair
// (feature_trainer_cuda.cu, built where nvcc is found) is DeviceFeatureDrafter<CudaDevice> beside a
// CudaModel. Both train the same parameters with the same loss, clip and AdamW, and write the same
// checkpoint.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "specdec.hpp"

namespace feature_training {

using specdec::train::FeatureBatch;
using specdec::train::FeatureLoss;

class FeatureTrainer {
public:
    virtual ~FeatureTrainer() = default;
    /// One training step on the batch: gradients of w·L_t + L_f, clipped to `clip`, one AdamW step at lr.
    virtual FeatureLoss step(const FeatureBatch& b, double token_weight, double clip, float lr) = 0;
    /// The loss without a step, and how often the drafter's argmax is the target's.
    virtual FeatureLoss evaluate(const FeatureBatch& b, double token_weight, double& top1) = 0;
    virtual specdec::FeatureCheckpoint checkpoint() const = 0;
    /// FLOPs of the products issued so far (0 where not counted).
    virtual double product_flops() const { return 0.0; }
};

/// The frozen target's features (state L) and laws for a batch of windows.
using Teacher = std::function<specdec::train::HiddenTeacher(const specdec::train::WindowBatch&)>;

/// The AdamW settings of the feature drafters (train_demo): β = (0.9, 0.95), `frozen` layer tensors untouched.
inline specdec::train::AdamWOptions feature_adamw(float weight_decay, std::vector<std::string> frozen = {}) {
    return {.beta1 = 0.9f, .beta2 = 0.95f, .weight_decay = weight_decay, .frozen = std::move(frozen)};
}

class CpuFeatureTrainer final : public FeatureTrainer {
public:
    CpuFeatureTrainer(specdec::FeatureCheckpoint init, specdec::ThreadPool& pool, const std::vector<std::string>& frozen,
                      float weight_decay)
        : model_(std::move(init), pool),
          pool_(&pool),
          layer_opt_(model_.layer().config(), model_.layer().params(), feature_adamw(weight_decay, frozen)),
          connector_opt_(model_.connector_shape(), model_.connector_params(), feature_adamw(weight_decay)) {}

    FeatureLoss step(const FeatureBatch& b, double token_weight, double clip, float lr) override {
        model_.zero_grad();
        const FeatureLoss loss = model_.forward_loss(b, token_weight, true);
        model_.clip_gradients(clip);
        layer_opt_.step(*pool_, model_.layer().params(), model_.layer().grads(), lr);
        connector_opt_.step(*pool_, model_.connector_params(), model_.connector_grads(), lr);
        return loss;
    }
    FeatureLoss evaluate(const FeatureBatch& b, double token_weight, double& top1) override {
        const FeatureLoss loss = model_.forward_loss(b, token_weight, false);
        top1 = model_.top1_agreement(b);
        return loss;
    }
    specdec::FeatureCheckpoint checkpoint() const override { return model_.checkpoint(); }

private:
    specdec::train::TrainableFeatureDrafter model_;
    specdec::ThreadPool* pool_;
    specdec::train::AdamW<> layer_opt_;
    specdec::train::AdamW<specdec::ConnectorShape, specdec::ConnectorWeights> connector_opt_;
};

/// The GPU's name and its bf16 product rate, measured on a large cuBLASLt product (the MFU's denominator).
struct GpuInfo {
    std::string name;
    double bf16_tflops = 0.0;
};

#if defined(SPECDEC_TRAIN_DEMO_CUDA)
}  // namespace feature_training
namespace specdec {
class CudaContext;
}
namespace feature_training {
// feature_trainer_cuda.cu: every call (lm_trainer_cuda.cu's too) shares one CUDA context on device 0.
specdec::CudaContext& cuda_context();
std::unique_ptr<FeatureTrainer> cuda_feature_trainer(const specdec::FeatureCheckpoint& init,
                                                     const std::vector<std::string>& frozen, float weight_decay);
/// The target as a CudaModel (deferred matrices, a widened model's, uploaded layer by layer) whose
/// forward over each window gives the states of `layer` (-1: the final normed state, the feature) and its
/// laws; windows up to max_window tokens. EDD's teacher too (layer L - 3).
Teacher cuda_teacher(const specdec::Checkpoint& target, int max_window, specdec::ThreadPool& pool, int layer = -1);
GpuInfo cuda_info();
#endif

}  // namespace feature_training

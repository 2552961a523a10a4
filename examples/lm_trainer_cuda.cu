// examples/lm_trainer_cuda.cu — train_demo's small LM, EDD and GLIDE drafters on the GPU: DeviceLlama,
// DeviceEdd and DeviceGlide on CudaDevice with DeviceAdamW (lm_trainer.hpp says what each piece does).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "feature_trainer.hpp"
#include "lm_trainer.hpp"
#include "specdec.hpp"

namespace lm_training {

using namespace specdec;
using namespace specdec::train;
using feature_training::cuda_context;

namespace {

/// Every tensor of a model: a frozen teacher trains none.
std::vector<std::string> every_tensor(const Weights& w, const Config& c) {
    std::vector<std::string> names;
    for_each_tensor(w, c, [&](const std::string& n, const std::vector<float>& t, std::size_t) {
        if (!t.empty()) names.push_back(n);
    });
    return names;
}

/// A device model's parameters and AdamW's moments on the host (Model: DeviceLlama or DeviceGlide).
template <class Params, class Model>
TrainerState<Params> device_state(const Model& model, const DeviceAdamW<CudaDevice>& opt) {
    TrainerState<Params> s{model.params(), {}, {}, opt.t()};
    s.m = s.v = s.params;
    opt.download_moments(s.m, s.v, model.config());
    return s;
}

/// Uploads a saved state into a device model and its AdamW.
template <class Params, class Model>
void device_restore(Model& model, DeviceAdamW<CudaDevice>& opt, TrainerState<Params> s) {
    model.tensors().upload(s.params, model.config());
    opt.restore(std::move(s.m), std::move(s.v), model.config(), s.t);
}

/// Host targets (N, kIgnoreIndex skipped) on the device, and how many count.
class DeviceTargets {
public:
    explicit DeviceTargets(CudaDevice& dev) : dev_(&dev) {}
    const int* upload(const std::vector<int>& targets) {
        if (buffer_.size() != targets.size()) buffer_ = dev_->alloc<int>(targets.size());
        dev_->upload(buffer_.data(), targets.data(), targets.size());
        counted_ = static_cast<int>(std::count_if(targets.begin(), targets.end(), [](int t) { return t >= 0; }));
        return buffer_.data();
    }
    int counted() const { return counted_; }

private:
    CudaDevice* dev_;
    CudaDevice::Buffer<int> buffer_;
    int counted_ = 0;
};

class CudaModelTrainer final : public ModelTrainer {
public:
    explicit CudaModelTrainer(const ModelSetup& s)
        : dev_(cuda_context()), model_(dev_, s.config, s.initial, s.adamw.frozen), opt_(dev_, model_.tensors(), s.adamw),
          targets_(dev_), distill_(s.distill) {
        if (s.teacher != nullptr)
            teacher_ = std::make_unique<DeviceLlama<CudaDevice>>(dev_, s.teacher->config, s.teacher->weights,
                                                                 every_tensor(s.teacher->weights, s.teacher->config));
    }

    double step(const WindowBatch& w, float lr) override {
        const ModelInput in{.B = w.B, .T = w.T, .tokens = w.inputs};
        const int N = w.B * w.T, V = model_.config().vocab_size;
        if (teacher_) {  // the teacher's law for every position, never leaving the GPU
            teacher_->forward(in);
            if (probs_.size() != static_cast<std::size_t>(N) * V) probs_ = dev_.alloc<float>(static_cast<std::size_t>(N) * V);
            dev_.run(N, ops::SoftmaxRow{probs_.data(), teacher_->logits(), V});
        }
        model_.zero_grad();
        model_.forward(in);
        const int* targets = targets_.upload(w.targets);
        const double loss =
            device_cross_entropy(dev_, model_.dlogits(), model_.logits(), targets, targets_.counted(), N, V, 1.0 - distill_);
        if (teacher_)
            device_soft_target_loss(dev_, model_.dlogits(), model_.logits(), probs_.data(), nullptr, N, N, V, distill_,
                                    /*with_entropy=*/true);
        model_.backward();
        device_clip_gradients(dev_, {&model_.tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const WindowBatch& w) override {
        model_.forward(ModelInput{.B = w.B, .T = w.T, .tokens = w.inputs});
        const int* targets = targets_.upload(w.targets);
        return {device_cross_entropy(dev_, model_.dlogits(), model_.logits(), targets, targets_.counted(), w.B * w.T,
                                     model_.config().vocab_size, /*weight=*/0.0),
                0.0};
    }
    TrainerState<Weights> state() const override { return device_state<Weights>(model_, opt_); }
    void restore(TrainerState<Weights> s) override { device_restore(model_, opt_, std::move(s)); }
    double product_flops() const override { return dev_.gemm_flops(); }

private:
    CudaDevice dev_;
    DeviceLlama<CudaDevice> model_;
    DeviceAdamW<CudaDevice> opt_;
    std::unique_ptr<DeviceLlama<CudaDevice>> teacher_;
    CudaDevice::Buffer<float> probs_;
    DeviceTargets targets_;
    double distill_;
};

class CudaEddTrainer final : public EddTrainer {
public:
    explicit CudaEddTrainer(const EddSetup& s)
        : dev_(cuda_context()), edd_(dev_, s.config, s.initial, s.adamw.frozen), opt_(dev_, edd_.model().tensors(), s.adamw),
          kl_(s.kl) {}

    double step(const EddBatch& b, float lr) override {
        edd_.model().zero_grad();
        const double loss = edd_.forward_loss(b, kl_);
        edd_.model().backward();
        device_clip_gradients(dev_, {&edd_.model().tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const EddBatch& b) override {
        const double kl = edd_.forward_loss(b, /*kl=*/true, /*weight=*/0.0);
        return {kl, edd_.top1_agreement(b)};
    }
    TrainerState<Weights> state() const override { return device_state<Weights>(edd_.model(), opt_); }
    void restore(TrainerState<Weights> s) override { device_restore(edd_.model(), opt_, std::move(s)); }
    double product_flops() const override { return dev_.gemm_flops(); }

private:
    CudaDevice dev_;
    DeviceEdd<CudaDevice> edd_;
    DeviceAdamW<CudaDevice> opt_;
    bool kl_;
};

class CudaGlideTrainer final : public GlideTrainer {
public:
    CudaGlideTrainer(const GlideSetup& s, const Checkpoint& target, int max_window)
        : dev_(cuda_context()),
          target_(target.config, target.weights, cuda_context(),
                  CudaModelOptions{.max_tree_nodes = max_window, .max_context = max_window}),
          model_(dev_, s.config, s.initial), opt_(dev_, model_.tensors(), s.adamw) {}

    double step(const GlideWindows& b, float lr) override {
        model_.zero_grad();
        const double loss = forward(b, 1.0);
        model_.backward();
        device_clip_gradients(dev_, {&model_.tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const GlideWindows& b) override { return {forward(b, 0.0), 0.0}; }
    TrainerState<GlideWeights> state() const override { return device_state<GlideWeights>(model_, opt_); }
    void restore(TrainerState<GlideWeights> s) override { device_restore(model_, opt_, std::move(s)); }
    double product_flops() const override { return dev_.gemm_flops(); }

private:
    /// The target's KV for the windows (on the GPU, read back per batch), the drafter's forward and its
    /// cross-entropy (gradient scaled by `weight`).
    double forward(const GlideWindows& b, double weight) {
        const WindowBatch& w = *b.windows;
        TargetKv<float> kv;
        if (model_.config().glide_cross_attention) kv = target_kv(target_, model_.config(), w.inputs, w.B, w.T);
        model_.forward(GlideBatch<float>{.B = w.B, .T = w.T, .tokens = w.inputs, .target = &kv, .cross_mask = b.cross_mask});
        return model_.cross_entropy(w.targets, weight);
    }

    CudaDevice dev_;
    CudaModel target_;
    DeviceGlide<CudaDevice> model_;
    DeviceAdamW<CudaDevice> opt_;
};

}  // namespace

std::unique_ptr<ModelTrainer> cuda_model_trainer(const ModelSetup& s) { return std::make_unique<CudaModelTrainer>(s); }
std::unique_ptr<EddTrainer> cuda_edd_trainer(const EddSetup& s) { return std::make_unique<CudaEddTrainer>(s); }
std::unique_ptr<GlideTrainer> cuda_glide_trainer(const GlideSetup& s, const Checkpoint& target, int max_window) {
    return std::make_unique<CudaGlideTrainer>(s, target, max_window);
}

}  // namespace lm_training

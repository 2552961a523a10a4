// examples/device_trainers.hpp — train_demo's small LM, EDD and GLIDE trainers over any Device: the GPU's
// (lm_trainer_cuda.cu instantiates them on CudaDevice) and the host's, on which the tests hold them to the
// CPU trainers of lm_trainer.hpp step for step (tests/train/test_lm_trainers.cpp).
//
// Each is the CPU trainer's step with the device trainer's pieces: DeviceLlama / DeviceEdd / DeviceGlide,
// the same losses (cross-entropy, forward KL), clipping to kClip over the trained tensors, DeviceAdamW,
// and the state a run saves (parameters and moments downloaded to the host).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lm_trainer.hpp"
#include "specdec.hpp"

namespace lm_training {

using namespace specdec::train;


/// Every tensor of a model: a frozen teacher trains none.
inline std::vector<std::string> every_tensor(const Weights& w, const Config& c) {
    std::vector<std::string> names;
    for_each_tensor(w, c, [&](const std::string& n, const std::vector<float>& t, std::size_t) {
        if (!t.empty()) names.push_back(n);
    });
    return names;
}

/// A device model's parameters and AdamW's moments on the host (Model: DeviceLlama or DeviceGlide).
template <class Params, class Model, class Device>
TrainerState<Params> device_state(const Model& model, const DeviceAdamW<Device>& opt) {
    TrainerState<Params> s{model.params(), {}, {}, opt.t()};
    s.m = s.v = s.params;
    opt.download_moments(s.m, s.v, model.config());
    return s;
}

/// Uploads a saved state into a device model and its AdamW.
template <class Params, class Model, class Device>
void device_restore(Model& model, DeviceAdamW<Device>& opt, TrainerState<Params> s) {
    model.tensors().upload(s.params, model.config());
    opt.restore(std::move(s.m), std::move(s.v), model.config(), s.t);
}

/// Host targets (N, kIgnoreIndex skipped) on the device, and how many count.
template <class Device>
class DeviceTargets {
public:
    explicit DeviceTargets(Device& dev) : dev_(&dev) {}
    const int* upload(const std::vector<int>& targets) {
        if (buffer_.size() != targets.size()) buffer_ = dev_->template alloc<int>(targets.size());
        dev_->upload(buffer_.data(), targets.data(), targets.size());
        counted_ = static_cast<int>(std::count_if(targets.begin(), targets.end(), [](int t) { return t >= 0; }));
        return buffer_.data();
    }
    int counted() const { return counted_; }

private:
    Device* dev_;
    typename Device::template Buffer<int> buffer_;
    int counted_ = 0;
};

/// The small LM on a device: DeviceLlama beside a frozen DeviceLlama teacher whose law never leaves the device.
template <class Device>
class DeviceModelTrainer final : public ModelTrainer {
public:
    DeviceModelTrainer(Device& dev, const ModelSetup& s)
        : dev_(&dev), model_(dev, s.config, s.initial, s.adamw.frozen), opt_(dev, model_.tensors(), s.adamw), targets_(dev),
          distill_(s.distill) {
        if (s.teacher != nullptr)
            teacher_ = std::make_unique<DeviceLlama<Device>>(dev, s.teacher->config, s.teacher->weights,
                                                             every_tensor(s.teacher->weights, s.teacher->config));
    }

    double step(const WindowBatch& w, float lr) override {
        const ModelInput in{.B = w.B, .T = w.T, .tokens = w.inputs};
        const int N = w.B * w.T, V = model_.config().vocab_size;
        if (teacher_) {
            teacher_->forward(in);
            if (probs_.size() != static_cast<std::size_t>(N) * V) probs_ = dev_->template alloc<float>(static_cast<std::size_t>(N) * V);
            dev_->run(N, ops::SoftmaxRow{probs_.data(), teacher_->logits(), V});
        }
        model_.zero_grad();
        model_.forward(in);
        const int* targets = targets_.upload(w.targets);
        const double loss =
            device_cross_entropy(*dev_, model_.dlogits(), model_.logits(), targets, targets_.counted(), N, V, 1.0 - distill_);
        if (teacher_)  // forward KL: the CPU trainer's kl_divergence
            device_soft_target_loss(*dev_, model_.dlogits(), model_.logits(), probs_.data(), nullptr, N, N, V, distill_,
                                    /*with_entropy=*/true);
        model_.backward();
        device_clip_gradients(*dev_, {&model_.tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const WindowBatch& w) override {
        model_.forward(ModelInput{.B = w.B, .T = w.T, .tokens = w.inputs});
        const int* targets = targets_.upload(w.targets);
        return {device_cross_entropy(*dev_, model_.dlogits(), model_.logits(), targets, targets_.counted(), w.B * w.T,
                                     model_.config().vocab_size, /*weight=*/0.0),
                0.0};
    }
    TrainerState<Weights> state() const override { return device_state<Weights>(model_, opt_); }
    void restore(TrainerState<Weights> s) override { device_restore(model_, opt_, std::move(s)); }

private:
    Device* dev_;
    DeviceLlama<Device> model_;
    DeviceAdamW<Device> opt_;
    std::unique_ptr<DeviceLlama<Device>> teacher_;
    typename Device::template Buffer<float> probs_;
    DeviceTargets<Device> targets_;
    double distill_;
};

/// EDD's layer on a device (DeviceEdd); the batches carry the target's states and laws.
template <class Device>
class DeviceEddTrainer final : public EddTrainer {
public:
    DeviceEddTrainer(Device& dev, const EddSetup& s)
        : dev_(&dev), edd_(dev, s.config, s.initial, s.adamw.frozen), opt_(dev, edd_.model().tensors(), s.adamw), kl_(s.kl) {}

    double step(const EddBatch& b, float lr) override {
        edd_.model().zero_grad();
        const double loss = edd_.forward_loss(b, kl_);
        edd_.model().backward();
        device_clip_gradients(*dev_, {&edd_.model().tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const EddBatch& b) override {
        const double kl = edd_.forward_loss(b, /*kl=*/true, /*weight=*/0.0);
        return {kl, edd_.top1_agreement(b)};
    }
    TrainerState<Weights> state() const override { return device_state<Weights>(edd_.model(), opt_); }
    void restore(TrainerState<Weights> s) override { device_restore(edd_.model(), opt_, std::move(s)); }

private:
    Device* dev_;
    DeviceEdd<Device> edd_;
    DeviceAdamW<Device> opt_;
    bool kl_;
};

/// GLIDE's drafter on a device (DeviceGlide) beside the target (ExposesKV), whose KV is read per batch
/// (train_glide.hpp's target_kv) and uploaded: on the GPU a CudaModel, whose rows come through the host.
template <class Device, class Target>
class DeviceGlideTrainer : public GlideTrainer {
public:
    DeviceGlideTrainer(Device& dev, const GlideSetup& s, Target& target)
        : dev_(&dev), target_(&target), model_(dev, s.config, s.initial), opt_(dev, model_.tensors(), s.adamw) {}

    double step(const GlideWindows& b, float lr) override {
        model_.zero_grad();
        const double loss = forward(b, 1.0);
        model_.backward();
        device_clip_gradients(*dev_, {&model_.tensors()}, kClip);
        opt_.step(lr);
        return loss;
    }
    Evaluation evaluate(const GlideWindows& b) override { return {forward(b, 0.0), 0.0}; }
    TrainerState<GlideWeights> state() const override { return device_state<GlideWeights>(model_, opt_); }
    void restore(TrainerState<GlideWeights> s) override { device_restore(model_, opt_, std::move(s)); }

private:
    /// The target's KV for the windows, the drafter's forward and its cross-entropy (gradient scaled by `weight`).
    double forward(const GlideWindows& b, double weight) {
        const WindowBatch& w = *b.windows;
        TargetKv<float> kv;
        if (model_.config().glide_cross_attention) kv = target_kv(*target_, model_.config(), w.inputs, w.B, w.T);
        model_.forward(GlideBatch<float>{.B = w.B, .T = w.T, .tokens = w.inputs, .target = &kv, .cross_mask = b.cross_mask});
        return model_.cross_entropy(w.targets, weight);
    }

    Device* dev_;
    Target* target_;
    DeviceGlide<Device> model_;
    DeviceAdamW<Device> opt_;
};

}  // namespace lm_training

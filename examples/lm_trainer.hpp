// examples/lm_trainer.hpp — train_demo's token-level drafters on the CPU or the GPU (train_demo --device):
// a small LM (distilled from the target), EDD's layer, GLIDE's drafter.
//
// Each kind's loop is written once against Trainer<Params, Batch>: one step (zero the gradients, the loss's
// forward and backward, clip to norm 1, AdamW at the schedule's rate), an evaluation, and the state a run
// saves between steps (parameters and AdamW's moments, on the host). The CPU trainers below are the
// reference (TrainableLlama, TrainableGlide, AdamW<>); the device ones (device_trainers.hpp, on CudaDevice in
// lm_trainer_cuda.cu, built where nvcc is found) run DeviceLlama, DeviceEdd and DeviceGlide with DeviceAdamW:
// the same parameters, losses, clip and schedule, and the same checkpoints. One difference: a frozen tensor (EDD's borrowed
// embedding) has no gradient on the device, while the CPU trainer computes one that its clipping counts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "specdec.hpp"

namespace lm_training {

using specdec::Checkpoint;
using specdec::Config;
using specdec::CpuModel;
using specdec::ThreadPool;
using specdec::Weights;
using specdec::train::EddBatch;
using specdec::GlideConfig;
using specdec::GlideWeights;
using specdec::train::WindowBatch;

/// A drafter's parameters and AdamW's moments and step count, on the host: what a run's state file holds.
template <class Params>
struct TrainerState {
    Params params, m, v;
    int t = 0;
};

/// An evaluation: the loss, and how often the drafter's argmax is the target's (where the batch has the
/// target's laws; 0 otherwise).
struct Evaluation {
    double loss = 0.0, top1 = 0.0;
};

template <class Params, class Batch>
class Trainer {
public:
    virtual ~Trainer() = default;
    /// One step on the batch at learning rate lr; returns the loss before it.
    virtual double step(const Batch& b, float lr) = 0;
    /// The loss without a step.
    virtual Evaluation evaluate(const Batch& b) = 0;
    virtual TrainerState<Params> state() const = 0;
    /// Continues from a saved state (shaped like state()'s).
    virtual void restore(TrainerState<Params> s) = 0;
    /// FLOPs of the products issued so far (0 where not counted).
    virtual double product_flops() const { return 0.0; }
};

/// Every drafter here clips the global gradient norm to 1.0 (nanoGPT's and llm.c's value).
constexpr double kClip = 1.0;

/// What the CPU trainers share: the reference model, AdamW over its parameters, the state between steps,
/// and the update after a backward.
template <class Params, class Batch, class Model, class Optimizer>
class CpuTrainer : public Trainer<Params, Batch> {
public:
    TrainerState<Params> state() const override {
        return {model_.params(), opt_.first_moment(), opt_.second_moment(), opt_.t()};
    }
    void restore(TrainerState<Params> s) override {
        model_.params() = std::move(s.params);
        opt_.restore(std::move(s.m), std::move(s.v), s.t);
    }

protected:
    template <class Cfg>
    CpuTrainer(const Cfg& config, const Params& initial, const specdec::train::AdamWOptions& adamw, ThreadPool& pool)
        : pool_(&pool), model_(config, initial, pool), opt_(config, model_.params(), adamw) {}

    /// After the backward: clip the gradients and take one AdamW step at lr.
    void update(float lr) {
        specdec::train::clip_grad_norm(*pool_, model_.grads(), model_.config(), kClip);
        opt_.step(*pool_, model_.params(), model_.grads(), lr);
    }

    ThreadPool* pool_;
    Model model_;
    Optimizer opt_;
};

// ---- the small LM: next-token cross-entropy, optionally distilled from a frozen teacher ---------------

/// What a small LM trains with: loss = (1 - distill) · CE + distill · KL(teacher ‖ student) per token.
struct ModelSetup {
    Config config;
    Weights initial;
    specdec::train::AdamWOptions adamw;
    const Checkpoint* teacher = nullptr;  // none: plain cross-entropy
    double distill = 0.0;
};

using ModelTrainer = Trainer<Weights, WindowBatch>;

class CpuModelTrainer final
    : public CpuTrainer<Weights, WindowBatch, specdec::train::TrainableLlama, specdec::train::AdamW<>> {
public:
    CpuModelTrainer(const ModelSetup& s, ThreadPool& pool) : CpuTrainer(s.config, s.initial, s.adamw, pool), distill_(s.distill) {
        if (s.teacher != nullptr) teacher_ = std::make_unique<specdec::train::TrainableLlama>(s.teacher->config, s.teacher->weights, pool);
    }

    double step(const WindowBatch& w, float lr) override {
        const specdec::train::ModelInput in{.B = w.B, .T = w.T, .tokens = w.inputs};
        const int N = w.B * w.T, V = model_.config().vocab_size;
        if (teacher_) {  // the teacher's law for every position of the batch
            teacher_->forward(in);
            probs_.resize(teacher_->logits().size());
            specdec::train::softmax_rows(*pool_, probs_.data(), teacher_->logits().data(), N, V);
        }
        model_.zero_grad();
        model_.forward(in);
        const double loss = model_.cross_entropy(w.targets, 1.0 - distill_);
        if (teacher_)
            specdec::train::kl_divergence(*pool_, model_.dlogits().data(), model_.logits().data(), probs_.data(), N, V, distill_);
        model_.backward();
        update(lr);
        return loss;
    }
    Evaluation evaluate(const WindowBatch& w) override {
        model_.forward(specdec::train::ModelInput{.B = w.B, .T = w.T, .tokens = w.inputs});
        return {model_.cross_entropy(w.targets, /*weight=*/0.0), 0.0};
    }

private:
    std::unique_ptr<specdec::train::TrainableLlama> teacher_;
    double distill_;
    std::vector<float> probs_;
};

// ---- EDD's layer: forward KL (or cross-entropy) on batches with the target's states and laws -------------

struct EddSetup {
    Config config;
    Weights initial;
    specdec::train::AdamWOptions adamw;  // its `frozen`: the borrowed embedding and final norm, when frozen
    bool kl = true;
};

using EddTrainer = Trainer<Weights, EddBatch>;

class CpuEddTrainer final : public CpuTrainer<Weights, EddBatch, specdec::train::TrainableLlama, specdec::train::AdamW<>> {
public:
    CpuEddTrainer(const EddSetup& s, ThreadPool& pool) : CpuTrainer(s.config, s.initial, s.adamw, pool), kl_(s.kl) {}

    double step(const EddBatch& b, float lr) override {
        model_.zero_grad();
        const double loss = specdec::train::edd_forward_loss(model_, b, kl_);
        model_.backward();
        update(lr);
        return loss;
    }
    /// Forward KL to the target whatever the training loss, and the top-1 agreement.
    Evaluation evaluate(const EddBatch& b) override {
        const double kl = specdec::train::edd_forward_loss(model_, b, /*kl=*/true, /*weight=*/0.0);
        return {kl, specdec::train::top1_agreement(model_, b)};
    }

private:
    bool kl_;
};

// ---- GLIDE's drafter: cross-entropy beside the frozen target, whose KV its cross-attention reads ------

/// B windows and the (T, T) cross-attention mask their queries see the target's rows through.
struct GlideWindows {
    const WindowBatch* windows = nullptr;
    std::span<const std::uint8_t> cross_mask;
};

struct GlideSetup {
    GlideConfig config;
    GlideWeights initial;
    specdec::train::AdamWOptions adamw;
};

using GlideTrainer = Trainer<GlideWeights, GlideWindows>;

/// The target runs on the CPU (CpuModel) and its KV is read per batch (train_glide.hpp's target_kv).
class CpuGlideTrainer final : public CpuTrainer<GlideWeights, GlideWindows, specdec::train::TrainableGlide<float>,
                                                specdec::train::AdamW<GlideConfig, GlideWeights>> {
public:
    CpuGlideTrainer(const GlideSetup& s, CpuModel& target, ThreadPool& pool)
        : CpuTrainer(s.config, s.initial, s.adamw, pool), target_(&target) {}

    double step(const GlideWindows& b, float lr) override {
        model_.zero_grad();
        const double loss = specdec::train::glide_batch(model_, *target_, *b.windows, b.cross_mask, /*with_backward=*/true);
        update(lr);
        return loss;
    }
    Evaluation evaluate(const GlideWindows& b) override {
        return {specdec::train::glide_batch(model_, *target_, *b.windows, b.cross_mask, /*with_backward=*/false), 0.0};
    }

private:
    CpuModel* target_;
};

#if defined(SPECDEC_TRAIN_DEMO_CUDA)
// lm_trainer_cuda.cu: the same trainers on the GPU (device 0, the context feature_trainer_cuda.cu shares).
std::unique_ptr<ModelTrainer> cuda_model_trainer(const ModelSetup& s);
std::unique_ptr<EddTrainer> cuda_edd_trainer(const EddSetup& s);
/// The target runs on the GPU too (a CudaModel); its KV comes through the host once per batch.
std::unique_ptr<GlideTrainer> cuda_glide_trainer(const GlideSetup& s, const Checkpoint& target, int max_window);
#endif

}  // namespace lm_training

// train_demo — builds the demo models that ship in models/: the tokenizer, a target and its drafters.
//
// Teaches: the whole pipeline from text to a HuggingFace-style model folder, in named steps —
// a byte-level BPE trained on the corpus, the corpus tokenised into token files, a Llama trained
// with AdamW under a warm-up + cosine schedule (optionally distilled from a teacher with forward KL,
// as EDD trains its drafter, §3.2), held-out perplexity, a loss chart, and a checkpoint in bf16.
// Every hyperparameter is read from models/<name>/train.json; nothing is hidden in code.
//
//   ./build/train_demo tokenizer        models/tokenizer.json and build/data/{train,test}.bin
//   ./build/train_demo model <name>     models/<name>/{config.json, model.safetensors, tokenizer.json,
//                                       loss.svg, train_log.json} from models/<name>/train.json
//   ./build/train_demo glide <name>     the same for a GLIDE drafter (glide-cape.txt §4.1) beside the
//                                       frozen target: cross-entropy, block-wise cross-attention mask
//   ./build/train_demo edd <name>       an EDD drafter (edd-pct.txt §3.1) or its VDM / ablations: one
//                                       layer on the target's states, dual-block mask, forward KL
//   ./build/train_demo eagle <name>...  EAGLE's feature drafter or FSPAD's (fspad.txt) and their ablations
//   ./build/train_demo fspad <name>...  (the same command): a connector and one layer on the target's features,
//                                       L = 0.1 L_t + L_f; train.json's "feature" picks FC / Feature Sampler,
//                                       PAD, and "layout": "eagle" EAGLE-1/2's layer without its end norms (the
//                                       one `specdec convert --to eagle` exports); several names train together
//                                       on one target forward per step
//   ./build/train_demo bigram           models/bigram.json: Max-Gram's fallback table (CS Drafting
//                                       §3.3), each token's most frequent successor in the training text
// scripts/train_models.sh runs them all in order (target first: drafters may distil from it).
//
// --device cuda trains any drafter on the GPU (examples/lm_trainer.hpp, feature_trainer.hpp: the same
// losses, schedule and checkpoints; docs/gpu_training.md); --out DIR writes DIR/<name> instead of
// models/<name>, and --steps N overrides train.json's step count.
//
// A model, GLIDE or EDD run writes its state (parameters, AdamW's moments, the curves so far) to
// build/checkpoints/<name>/train_state.safetensors every 100 steps (--checkpoint-every N), through a
// temporary file renamed into place, so Ctrl-C leaves the last one whole; `--resume` continues from it
// bit for bit (the same weights and losses as a run that was never stopped, given the same thread
// count and train.json). train_log.json records the rate of the training steps themselves,
// tokens_per_second, and flops_utilization: model FLOPs per second (6 x the weights in products, plus
// the causal attention's products; a teacher's forward where one is distilled from) over the best
// f32 FMA ceiling that examples/bench/ceilings.hpp measured during the run.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>

#include "bench/ceilings.hpp"
#include "bench/compose.hpp"
#include "feature_trainer.hpp"
#include "lm_trainer.hpp"
#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace specdec::train;
namespace fs = std::filesystem;

namespace {

const fs::path kData = "build/data";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) detail::fail("train_demo", "cannot open '" + p.string() + "' (run from the repository root)");
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

/// Documents are separated by <|endoftext|> lines in the corpus; the tokenizer keeps it as one token.
std::vector<int> tokenize_corpus(const Tokenizer& tok, const fs::path& file) {
    return tok.encode(read_file(file));
}

int make_tokenizer() {
    const json::Value spec = json::parse(read_file("models/tokenizer.train.json"), "models/tokenizer.train.json");
    const int vocab = static_cast<int>(spec.at("vocab_size").as_int());
    const auto t0 = std::chrono::steady_clock::now();
    const Tokenizer tok = Tokenizer::train(read_file("data/corpus/train.txt"), vocab);
    tok.save("models/tokenizer.json");
    fs::create_directories(kData);
    const std::vector<int> train_tokens = tokenize_corpus(tok, "data/corpus/train.txt");
    const std::vector<int> test_tokens = tokenize_corpus(tok, "data/corpus/test.txt");
    write_token_file((kData / "train.bin").string(), train_tokens);
    write_token_file((kData / "test.bin").string(), test_tokens);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("tokenizer: %d tokens (%d merges) in %.1f s; train %zu tokens, test %zu tokens (%.2f bytes/token)\n",
                tok.vocab_size(), tok.n_merges(), secs, train_tokens.size(), test_tokens.size(),
                double(read_file("data/corpus/train.txt").size()) / double(train_tokens.size()));
    return 0;
}

Config config_from(const json::Value& c, int vocab) {
    return Config{.hidden_size = static_cast<int>(c.at("hidden_size").as_int()),
                  .intermediate_size = static_cast<int>(c.at("intermediate_size").as_int()),
                  .num_hidden_layers = static_cast<int>(c.at("num_hidden_layers").as_int()),
                  .num_attention_heads = static_cast<int>(c.at("num_attention_heads").as_int()),
                  .num_key_value_heads = static_cast<int>(c.at("num_key_value_heads").as_int()),
                  .vocab_size = vocab,
                  .max_position_embeddings = static_cast<int>(c.at("max_position_embeddings").as_int()),
                  .tie_word_embeddings = c.at("tie_word_embeddings").as_bool()};
}


/// The learning-rate schedule of a train.json: warm-up, then a cosine from lr down to min_lr.
CosineSchedule schedule_from(const json::Value& hp, int steps) {
    return CosineSchedule{.max_lr = static_cast<float>(hp.at("lr").as_double()),
                          .min_lr = static_cast<float>(hp.at("min_lr").as_double()),
                          .warmup_steps = static_cast<int>(hp.at("warmup").as_int()),
                          .total_steps = steps};
}

// ---------------------------------------------------------------------------------------------------
// Checkpoints between steps, and what a run measures

struct RunOptions {
    bool resume = false;         // continue from build/checkpoints/<name>/ when a state is there (not feature drafters)
    int checkpoint_every = 100;  // steps between states written
    std::string device = "cpu";  // cpu | cuda
    std::string out;             // write <out>/<name> instead of models/<name>
    int steps = 0;               // > 0: override train.json's
    // Feature drafters only (make_feature):
    std::string target_scale;    // 110m | 1b | 7b: the widened target (empty: the demo target)
    int batch = 0;               // > 0: override train.json's
    double max_seconds = 0;      // > 0: stop the loop when this much time is spent

    /// The folder a run writes: models/<name>, or <out>/<name>.
    fs::path out_dir(const std::string& name) const {
        const fs::path d = out.empty() ? fs::path("models") / name : fs::path(out) / name;
        std::error_code ec;
        fs::create_directories(d, ec);
        detail::require(!ec, "train_demo", [&] { return "cannot create the output folder " + d.string() + ": " + ec.message(); });
        return d;
    }
    /// train.json's step count, or --steps.
    int step_count(const json::Value& hp) const { return steps > 0 ? steps : static_cast<int>(hp.at("steps").as_int()); }
};

fs::path state_path(const std::string& name) { return fs::path("build/checkpoints") / name / "train_state.safetensors"; }

/// What a run keeps besides its tensors: enough to continue it, and to write its chart and log.
struct RunRecord {
    int step = 0;                // steps done
    double smooth = 0;           // the progress line's smoothed loss
    double step_seconds = 0;     // time inside training steps (evaluations excluded), every run of a resumed training
    double train_seconds = 0;    // wall time of every run of a resumed training
    double fma_peak = 0;         // the best f32 FMA ceiling any of its runs measured, GFLOP/s
    Series train_curve{"train", {}, {}}, held_out{"held-out", {}, {}};

    /// After the step that began at t0 and ended with `loss`: the times, the curve, the progress line.
    void record_step(double loss, std::chrono::steady_clock::time_point t0, double seconds_before,
                     ProgressLine& progress, double tokens_this_run) {
        step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        smooth = step == 0 ? loss : 0.95 * smooth + 0.05 * loss;
        ++step;
        train_curve.xs.push_back(step), train_curve.ys.push_back(loss);
        train_seconds = seconds_before + progress.seconds_since_start();
        progress.update(step, smooth, tokens_this_run);
    }
};

json::Value series_json(const Series& s) {
    json::Array xs(s.xs.begin(), s.xs.end()), ys(s.ys.begin(), s.ys.end());
    json::Object o;
    o.set("x", std::move(xs));
    o.set("y", std::move(ys));
    return o;
}

Series series_from(const std::string& name, const json::Value& v) {
    Series s{name, {}, {}};
    for (const json::Value& x : v.at("x").as_array()) s.xs.push_back(x.as_double());
    for (const json::Value& y : v.at("y").as_array()) s.ys.push_back(y.as_double());
    return s;
}

/// Writes the run's state (the trainer's parameters and AdamW's moments, from whichever device it runs on);
/// `hp_text` (train.json as read) ties it to its hyperparameters.
template <class Params, class Batch, class Cfg>
void save_run(const std::string& name, const Cfg& cfg, const lm_training::Trainer<Params, Batch>& trainer,
              const RunRecord& run, const std::string& hp_text) {
    const lm_training::TrainerState<Params> state = trainer.state();
    json::Object r;
    r.set("train_json", hp_text);
    r.set("step", run.step);
    r.set("adamw_t", state.t);
    r.set("smooth", run.smooth);
    r.set("step_seconds", run.step_seconds);
    r.set("train_seconds", run.train_seconds);
    r.set("fma_peak", run.fma_peak);
    r.set("train_curve", series_json(run.train_curve));
    r.set("held_out", series_json(run.held_out));
    save_train_state(state_path(name), cfg, state.params, state.m, state.v, json::Value(std::move(r)));
}

/// With --resume and a state on disk: loads it into the trainer and returns its record; otherwise a
/// fresh record (step 0).
template <class Params, class Batch, class Cfg>
RunRecord load_run(const std::string& name, const Cfg& cfg, lm_training::Trainer<Params, Batch>& trainer,
                   const std::string& hp_text, const RunOptions& options) {
    const fs::path path = state_path(name);
    if (!fs::exists(path)) {
        if (options.resume) std::printf("%s: no state at %s, starting from step 0\n", name.c_str(), path.string().c_str());
        return {};
    }
    if (!options.resume) {
        std::printf("%s: starting from step 0 (--resume would continue the run saved at %s)\n", name.c_str(),
                    path.string().c_str());
        return {};
    }
    lm_training::TrainerState<Params> state = trainer.state();  // shaped like the saved tensors
    const json::Value r = load_train_state(path, cfg, state.params, state.m, state.v);
    detail::require(r.at("train_json").as_string() == hp_text, "train_demo", [&] {
        return path.string() + " was written under another models/" + name +
               "/train.json; restore that file, or run without --resume to start over";
    });
    state.t = static_cast<int>(r.at("adamw_t").as_int());
    trainer.restore(std::move(state));
    RunRecord run;
    run.step = static_cast<int>(r.at("step").as_int());
    run.smooth = r.at("smooth").as_double();
    run.step_seconds = r.at("step_seconds").as_double();
    run.train_seconds = r.at("train_seconds").as_double();
    run.fma_peak = r.at("fma_peak").as_double();
    run.train_curve = series_from("train", r.at("train_curve"));
    run.held_out = series_from("held-out", r.at("held_out"));
    std::printf("%s: resuming at step %d from %s\n", name.c_str(), run.step, path.string().c_str());
    return run;
}

/// Where a run trains (--device): the CPU's threads, whose f32 FMA ceiling the run measures, or the GPU,
/// whose bf16 product rate (8192^3 through cuBLASLt, random operands) is measured once at the start.
struct Backend {
    bool cuda = false;
    int threads = 0;
    feature_training::GpuInfo gpu;
    std::string where() const { return cuda ? "the GPU (" + gpu.name + ")" : std::to_string(threads) + " threads"; }
};

Backend backend_for(const RunOptions& options, int threads) {
    detail::require(options.device == "cpu" || options.device == "cuda", "train_demo", [&] {
        return "--device '" + options.device + "' is neither cpu nor cuda";
    });
    Backend b{options.device == "cuda", threads, {}};
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (b.cuda) b.gpu = feature_training::cuda_info();
#else
    detail::require(!b.cuda, "train_demo", [] {
        return std::string("--device cuda: this train_demo was built without CUDA (configure with nvcc on PATH)");
    });
#endif
    return b;
}

/// The rate of the training steps and its share of the ceiling (FMA on the CPU, bf16 products on the
/// GPU), into a run's log.
void log_rates(json::Object& log, const RunRecord& run, int steps, int B, int T, double flops_per_token,
               const Backend& backend) {
    const double tokens_per_second = double(steps) * B * T / run.step_seconds;
    log.set("device", backend.cuda ? "cuda" : "cpu");
    log.set("machine", example::machine_name());  // the host's CPU; on a GPU run the card is "gpu" below
    log.set("train_seconds", run.train_seconds);
    log.set("train_tokens_per_second", double(steps) * B * T / run.train_seconds);  // evaluations included
    log.set("tokens_per_second", tokens_per_second);                                // the training steps alone
    log.set("model_flops_per_token", flops_per_token);
    if (backend.cuda) {
        log.set("gpu", backend.gpu.name);
        log.set("bf16_gemm_peak_tflops", backend.gpu.bf16_tflops);
        log.set("mfu", tokens_per_second * flops_per_token / (backend.gpu.bf16_tflops * 1e12));
    } else {
        log.set("fma_peak_gflops", run.fma_peak);
        log.set("flops_utilization", tokens_per_second * flops_per_token / (run.fma_peak * 1e9));
        log.set("threads", backend.threads);
    }
}

/// "training steps at N tokens/s = P% of <the ceiling>", for the closing line.
std::string rate_summary(const RunRecord& run, int steps, int B, int T, double flops_per_token, const Backend& backend) {
    const double tokens_per_second = double(steps) * B * T / run.step_seconds;
    const double ceiling = backend.cuda ? backend.gpu.bf16_tflops * 1e12 : run.fma_peak * 1e9;
    char line[256];
    std::snprintf(line, sizeof line, "training steps at %.0f tokens/s = %.1f%% of %s", tokens_per_second,
                  100.0 * tokens_per_second * flops_per_token / ceiling,
                  backend.cuda ? ("the measured bf16 product rate on " + backend.gpu.name).c_str() : "the FMA ceiling");
    return line;
}

/// The f32 FMA ceiling of `pool`'s threads right now (ceilings.hpp). A run measures it at the start
/// and at every held-out evaluation and keeps the best: on a shared machine one measurement can find
/// the cores busy, lower the ceiling and raise the utilisation.
double fma_ceiling(ThreadPool& pool) { return ::bench::fma_ceiling(pool); }

int make_model(const std::string& name, const RunOptions& options) {
    // Step 1: hyperparameters, tokenizer and data.
    const fs::path dir = fs::path("models") / name, out = options.out_dir(name);
    const std::string hp_text = read_file(dir / "train.json");
    const json::Value hp = json::parse(hp_text, (dir / "train.json").string());
    const Tokenizer tok = Tokenizer::load("models/tokenizer.json");
    const Config cfg = config_from(hp.at("config"), tok.vocab_size());
    const int steps = options.step_count(hp), B = static_cast<int>(hp.at("batch").as_int());
    const int T = static_cast<int>(hp.at("seq_len").as_int()), threads = static_cast<int>(hp.at("threads").as_int());
    const auto seed = static_cast<std::uint64_t>(hp.at("seed").as_int());
    const CosineSchedule schedule = schedule_from(hp, steps);
    const TokenFile train_file((kData / "train.bin").string()), test_file((kData / "test.bin").string());
    train_file.check_vocab(cfg.vocab_size);
    const TokenRange train_range{0, train_file.size()}, test_range{0, test_file.size()};

    // Step 2: the model, optionally a frozen teacher to distil from, the optimizer: on the CPU or the GPU.
    ThreadPool pool(threads);
    const Backend backend = backend_for(options, threads);
    lm_training::ModelSetup setup{cfg, random_weights(cfg, seed, 0.02f),
                                  AdamWOptions{.weight_decay = static_cast<float>(hp.at("weight_decay").as_double())}};
    Checkpoint teacher;
    if (const auto* t = hp.find("teacher")) {
        teacher = load_checkpoint(fs::path("models") / t->as_string());
        detail::require(teacher.config.vocab_size == cfg.vocab_size, "train_demo", [&] {
            return "teacher vocabulary " + std::to_string(teacher.config.vocab_size) + " differs from " + std::to_string(cfg.vocab_size);
        });
        setup.teacher = &teacher;
        setup.distill = hp.at("distill_weight").as_double();
    }
    const std::size_t n_params = parameter_count(setup.initial, cfg);
    std::unique_ptr<lm_training::ModelTrainer> model;
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (backend.cuda) model = lm_training::cuda_model_trainer(setup);
#endif
    if (!model) model = std::make_unique<lm_training::CpuModelTrainer>(setup, pool);
    std::printf("%s: %zu parameters, %d steps of %d x %d tokens (%.2f epochs of %zu), on %s%s\n", name.c_str(), n_params,
                steps, B, T, double(steps) * B * T / double(train_file.size()), train_file.size(), backend.where().c_str(),
                setup.teacher ? (", distilled from " + hp.at("teacher").as_string()).c_str() : "");
    RunRecord run = load_run(name, cfg, *model, hp_text, options);
    if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
    // Model FLOPs per token: the student's forward and backward, and the teacher's forward.
    const double flops_per_token =
        3.0 * forward_flops_per_token(cfg, T) + (setup.teacher ? forward_flops_per_token(teacher.config, T) : 0.0);
    const auto evaluate_model = [&] {
        return evaluate_windows(test_file, test_range, T, static_cast<int>(hp.at("eval_windows").as_int()), B,
                                [&](const WindowBatch& w) { return model->evaluate(w).loss; });
    };

    // Step 3: the loop, from the step the run is at.
    const int eval_every = std::max(1, steps / 20);
    ProgressLine progress(std::cerr, steps,
                          ProgressOptions{.terminal = stderr_is_terminal(), .plain_every_s = 10, .first_step = run.step});
    const double seconds_before = run.train_seconds;
    const int first_step = run.step;
    for (int step = run.step; step < steps; ++step) {
        if (step % eval_every == 0) {
            run.held_out.xs.push_back(step), run.held_out.ys.push_back(evaluate_model().loss);
            if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
        }
        const auto t0 = std::chrono::steady_clock::now();
        const WindowBatch batch = random_windows(train_file, train_range, B, T, seed, static_cast<std::uint32_t>(step));
        const double loss = model->step(batch, schedule.at(step));
        run.record_step(loss, t0, seconds_before, progress, double(step + 1 - first_step) * B * T);
        if (run.step % options.checkpoint_every == 0 || run.step == steps) save_run(name, cfg, *model, run, hp_text);
    }
    progress.finish();
    const EvalResult final_eval = evaluate_model();
    if (run.held_out.xs.empty() || run.held_out.xs.back() != steps)
        run.held_out.xs.push_back(steps), run.held_out.ys.push_back(final_eval.loss);

    // Step 4: the checkpoint (bf16, HF layout), its tokenizer, the loss chart and a log.
    save_checkpoint(out, cfg, model->state().params, SaveFormat::kBF16);
    fs::copy_file("models/tokenizer.json", out / "tokenizer.json", fs::copy_options::overwrite_existing);
    write_svg_chart((out / "loss.svg").string(), name + ": cross-entropy per token",
                    std::vector<Series>{run.train_curve, run.held_out},
                    ChartOptions{.x_label = "step", .y_label = "nats per token"});
    // What ships is bf16: measure that, on the CPU (the reference), whatever trained it.
    const Checkpoint back = load_checkpoint(out);
    TrainableLlama shipped(back.config, back.weights, pool);
    const EvalResult bf16_eval = evaluate(shipped, test_file, test_range, T, static_cast<int>(hp.at("eval_windows").as_int()), B);
    json::Object log;
    log.set("parameters", static_cast<std::int64_t>(n_params));
    log_rates(log, run, steps, B, T, flops_per_token, backend);
    log.set("heldout_loss", bf16_eval.loss);
    log.set("heldout_perplexity", bf16_eval.perplexity);
    log.set("heldout_tokens", static_cast<std::int64_t>(bf16_eval.n_tokens));
    std::ofstream(out / "train_log.json") << json::dump(json::Value(std::move(log)), 2) << "\n";
    std::printf("%s: held-out perplexity %.2f (loss %.3f nats/token, bf16 checkpoint; float32 before saving %.2f), "
                "%.0f s, %s, wrote %s\n",
                name.c_str(), bf16_eval.perplexity, bf16_eval.loss, final_eval.perplexity, run.train_seconds,
                rate_summary(run, steps, B, T, flops_per_token, backend).c_str(), out.string().c_str());
    return 0;
}

/// GLIDE's drafter (glide-cape.txt §4.1, App. A): trained from scratch with next-token cross-entropy
/// while the frozen target supplies the KV cache its cross-attention reads, through the block-wise mask
/// (blocks of L tokens see the target rows of earlier blocks only). "glide_cross_attention": false
/// trains the paper's vanilla drafter (§5.2) with the same code, data, seed and steps.
int make_glide(const std::string& name, const RunOptions& options) {
    // Step 1: hyperparameters, tokenizer, data, and the frozen target.
    const fs::path dir = fs::path("models") / name, out = options.out_dir(name);
    const std::string hp_text = read_file(dir / "train.json");
    const json::Value hp = json::parse(hp_text, (dir / "train.json").string());
    const Tokenizer tok = Tokenizer::load("models/tokenizer.json");
    const int steps = options.step_count(hp), B = static_cast<int>(hp.at("batch").as_int());
    const int T = static_cast<int>(hp.at("seq_len").as_int()), threads = static_cast<int>(hp.at("threads").as_int());
    const int block_length = static_cast<int>(hp.at("block_length").as_int());
    const auto seed = static_cast<std::uint64_t>(hp.at("seed").as_int());
    const CosineSchedule schedule = schedule_from(hp, steps);
    const std::string target_name = hp.find("target") ? hp.at("target").as_string() : "target";
    ThreadPool pool(threads);
    const Backend backend = backend_for(options, threads);
    const Checkpoint target_ck = load_checkpoint(fs::path("models") / target_name);
    CpuModel target(target_ck.config, target_ck.weights, ModelOptions{.pool = &pool});  // the CPU's, and the shipped check's
    const GlideConfig cfg = glide_config_for(config_from(hp.at("config"), tok.vocab_size()), target_ck.config,
                                             hp.at("glide_cross_attention").as_bool());
    const TokenFile train_file((kData / "train.bin").string()), test_file((kData / "test.bin").string());
    train_file.check_vocab(cfg.draft.vocab_size);
    const TokenRange train_range{0, train_file.size()}, test_range{0, test_file.size()};

    // Step 2: the drafter and its optimizer (on the CPU or the GPU, the target beside it), and the
    // cross-attention masks: block-wise for training and held-out loss; "every earlier row" (the first
    // draft after a verification) as a second figure.
    const lm_training::GlideSetup setup{cfg, random_glide_weights(cfg, seed, 0.02f),
                                        AdamWOptions{.weight_decay = static_cast<float>(hp.at("weight_decay").as_double())}};
    std::unique_ptr<lm_training::GlideTrainer> model;
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (backend.cuda) model = lm_training::cuda_glide_trainer(setup, target_ck, T);
#endif
    if (!model) model = std::make_unique<lm_training::CpuGlideTrainer>(setup, target, pool);
    const std::vector<std::uint8_t> block_mask = glide_block_mask(T, T, block_length);
    const std::vector<std::uint8_t> first_draft_mask = glide_inference_mask(T, T, T);
    const std::size_t n_params = parameter_count(setup.initial, cfg);
    std::printf("%s: %zu parameters, %s, %d steps of %d x %d tokens (%.2f epochs of %zu), on %s\n", name.c_str(),
                n_params,
                cfg.glide_cross_attention ? ("GLIDE reading " + target_name + "'s KV, block length " +
                                             std::to_string(block_length)).c_str()
                                          : "vanilla drafter (no cross-attention)",
                steps, B, T, double(steps) * B * T / double(train_file.size()), train_file.size(), backend.where().c_str());

    RunRecord run = load_run(name, cfg, *model, hp_text, options);
    if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
    // Model FLOPs per token: the drafter's forward and backward (its self-attention layers as a Llama's,
    // and per layer the cross-attention's two projections and its products over the target rows a
    // query sees, about T/2 under the block mask), and the frozen target's forward for its KV.
    const double cross = cfg.glide_cross_attention
                             ? cfg.draft.num_hidden_layers * (2.0 * 2.0 * cfg.draft.hidden_size * cfg.cross_dim() +
                                                              4.0 * cfg.cross_dim() * (T + 1) / 2.0)
                             : 0.0;
    const double flops_per_token = 3.0 * (forward_flops_per_token(cfg.draft, T) + cross) +
                                   (cfg.glide_cross_attention ? forward_flops_per_token(target_ck.config, T) : 0.0);
    const int eval_windows = static_cast<int>(hp.at("eval_windows").as_int());
    const auto evaluate_glide_trainer = [&](std::span<const std::uint8_t> mask) {
        return evaluate_windows(test_file, test_range, T, eval_windows, B, [&](const WindowBatch& w) {
            return model->evaluate(lm_training::GlideWindows{&w, mask}).loss;
        });
    };

    // Step 3: the loop, from the step the run is at; held-out loss 10 times (each evaluation runs the target too).
    const int eval_every = std::max(1, steps / 10);
    ProgressLine progress(std::cerr, steps,
                          ProgressOptions{.terminal = stderr_is_terminal(), .plain_every_s = 10, .first_step = run.step});
    const double seconds_before = run.train_seconds;
    const int first_step = run.step;
    for (int step = run.step; step < steps; ++step) {
        if (step % eval_every == 0) {
            run.held_out.xs.push_back(step), run.held_out.ys.push_back(evaluate_glide_trainer(block_mask).loss);
            if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
        }
        const auto t0 = std::chrono::steady_clock::now();
        const WindowBatch batch = random_windows(train_file, train_range, B, T, seed, static_cast<std::uint32_t>(step));
        const double loss = model->step(lm_training::GlideWindows{&batch, block_mask}, schedule.at(step));
        run.record_step(loss, t0, seconds_before, progress, double(step + 1 - first_step) * B * T);
        if (run.step % options.checkpoint_every == 0 || run.step == steps) save_run(name, cfg, *model, run, hp_text);
    }
    progress.finish();
    const EvalResult final_eval = evaluate_glide_trainer(block_mask);
    if (run.held_out.xs.empty() || run.held_out.xs.back() != steps)
        run.held_out.xs.push_back(steps), run.held_out.ys.push_back(final_eval.loss);

    // Step 4: the checkpoint (bf16), its tokenizer, the loss chart and a log, measured as shipped (on the CPU).
    save_glide_checkpoint(out, cfg, model->state().params, SaveFormat::kBF16);
    fs::copy_file("models/tokenizer.json", out / "tokenizer.json", fs::copy_options::overwrite_existing);
    write_svg_chart((out / "loss.svg").string(), name + ": cross-entropy per token",
                    std::vector<Series>{run.train_curve, run.held_out},
                    ChartOptions{.x_label = "step", .y_label = "nats per token"});
    const GlideCheckpoint back = load_glide_checkpoint(out);
    TrainableGlide<float> shipped(back.config, back.weights, pool);
    const EvalResult bf16_eval = evaluate_glide(shipped, target, test_file, test_range, T, eval_windows, B, block_mask);
    const EvalResult first_eval =
        evaluate_glide(shipped, target, test_file, test_range, T, eval_windows, B, first_draft_mask);
    json::Object log;
    log.set("parameters", static_cast<std::int64_t>(n_params));
    log.set("glide_cross_attention", cfg.glide_cross_attention);
    log.set("target", target_name);
    log_rates(log, run, steps, B, T, flops_per_token, backend);
    log.set("heldout_loss", bf16_eval.loss);  // block-wise mask, as trained
    log.set("heldout_perplexity", bf16_eval.perplexity);
    log.set("heldout_loss_first_draft", first_eval.loss);  // every query sees all earlier target rows
    log.set("heldout_perplexity_first_draft", first_eval.perplexity);
    log.set("heldout_tokens", static_cast<std::int64_t>(bf16_eval.n_tokens));
    std::ofstream(out / "train_log.json") << json::dump(json::Value(std::move(log)), 2) << "\n";
    std::printf("%s: held-out perplexity %.2f (loss %.3f nats/token, block mask, bf16 checkpoint; float32 before "
                "saving %.2f; %.2f when every query sees all earlier target rows), %.0f s, %s, wrote %s\n",
                name.c_str(), bf16_eval.perplexity, bf16_eval.loss, final_eval.perplexity, first_eval.perplexity,
                run.train_seconds, rate_summary(run, steps, B, T, flops_per_token, backend).c_str(), out.string().c_str());
    return 0;
}

/// EDD's drafter (edd-pct.txt §3.1, App. B) beside the frozen target: one decoder layer fed the target's
/// states of layer L - 3 as a soft prompt, the dual-block mask with L redrawn in 5..10 every step, forward
/// KL to the target. "edd" in train.json picks the variant: Table 1's VDM (no soft prompt) and Table
/// 3's ablations (cross-entropy, a fixed block length) train with the same code.
int make_edd(const std::string& name, const RunOptions& options) {
    // Step 1: hyperparameters, data, the frozen target and what it says about the held-out windows.
    const fs::path dir = fs::path("models") / name, out = options.out_dir(name);
    const std::string hp_text = read_file(dir / "train.json");
    const json::Value hp = json::parse(hp_text, (dir / "train.json").string());
    const json::Value& e = hp.at("edd");
    const EddTrainOptions eo{.soft_prompt = e.at("soft_prompt").as_bool(),
                             .kl = e.at("loss").as_string() == "kl",
                             .min_block = static_cast<int>(e.at("min_block").as_int()),
                             .max_block = static_cast<int>(e.at("max_block").as_int())};
    eo.validate();
    const bool freeze = e.at("freeze_embeddings").as_bool();
    const int steps = options.step_count(hp), B = static_cast<int>(hp.at("batch").as_int());
    const int T = static_cast<int>(hp.at("seq_len").as_int()), threads = static_cast<int>(hp.at("threads").as_int());
    const auto seed = static_cast<std::uint64_t>(hp.at("seed").as_int());
    const CosineSchedule schedule = schedule_from(hp, steps);
    const std::string target_name = hp.at("target").as_string();
    ThreadPool pool(threads);
    const Backend backend = backend_for(options, threads);
    const Checkpoint target_ck = load_checkpoint(fs::path("models") / target_name);
    const int layer = edd_hidden_layer(target_ck.config);
    const Config cfg = edd_drafter_config(target_ck.config);
    // The target's states and laws per batch: a CpuModel, or with --device cuda a CudaModel.
    feature_training::Teacher teacher;
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (backend.cuda) teacher = feature_training::cuda_teacher(target_ck, T, pool, layer);
#endif
    if (!teacher) {
        auto target = std::make_shared<CpuModel>(target_ck.config, target_ck.weights, ModelOptions{.pool = &pool});
        teacher = [target, &pool, layer](const WindowBatch& w) { return edd_teacher(*target, pool, layer, w); };
    }
    const TokenFile train_file((kData / "train.bin").string()), test_file((kData / "test.bin").string());
    train_file.check_vocab(cfg.vocab_size);
    const TokenRange train_range{0, train_file.size()}, test_range{0, test_file.size()};
    const int eval_windows = static_cast<int>(hp.at("eval_windows").as_int());
    const int eval_block = (eo.min_block + eo.max_block) / 2;
    std::vector<EddBatch> eval_set;  // the held-out windows with the target's states and laws, computed once
    for (int first = 0; first < eval_windows; first += B) {
        const WindowBatch w = spaced_windows(test_file, test_range, T, eval_windows, first, std::min(B, eval_windows - first));
        eval_set.push_back(edd_batch(w, teacher(w), eval_block, eo));
    }

    // Step 2: the drafter (embedding, head and final norm from the target) and its optimizer.
    lm_training::EddSetup setup{cfg, edd_initial_weights(cfg, target_ck.weights, seed),
                                AdamWOptions{.weight_decay = static_cast<float>(hp.at("weight_decay").as_double())}, eo.kl};
    if (freeze) setup.adamw.frozen = {"model.embed_tokens.weight", "model.norm.weight"};
    std::unique_ptr<lm_training::EddTrainer> model;
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (backend.cuda) model = lm_training::cuda_edd_trainer(setup);
#endif
    if (!model) model = std::make_unique<lm_training::CpuEddTrainer>(setup, pool);
    const std::size_t n_params = parameter_count(setup.initial, cfg);
    std::printf("%s: %zu parameters (%s), %s of %s's layer-%d states, %s, blocks of %d..%d, %d steps of %d x %d "
                "tokens, on %s\n",
                name.c_str(), n_params, freeze ? "embedding and head frozen" : "all trained",
                eo.soft_prompt ? "soft prompt" : "no soft prompt (VDM)", target_name.c_str(), layer,
                eo.kl ? "forward KL" : "cross-entropy", eo.min_block, eo.max_block, steps, B, T, backend.where().c_str());
    RunRecord run = load_run(name, cfg, *model, hp_text, options);
    if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
    const int rows = eo.soft_prompt ? 2 : 1;  // drafter rows per token
    const double flops_per_token =
        3.0 * rows * forward_flops_per_token(cfg, rows * T) + forward_flops_per_token(target_ck.config, T);
    // Held-out: forward KL to the target and how often the drafter's argmax is the target's.
    const auto evaluate_edd = [&](lm_training::EddTrainer& m) {
        double kl = 0.0, agree = 0.0;
        for (const EddBatch& b : eval_set) {
            const lm_training::Evaluation ev = m.evaluate(b);
            kl += ev.loss * b.B, agree += ev.top1 * b.B;
        }
        return std::pair{kl / eval_windows, agree / eval_windows};
    };

    // Step 3: the loop.
    const int eval_every = std::max(1, steps / 10);
    ProgressLine progress(std::cerr, steps,
                          ProgressOptions{.terminal = stderr_is_terminal(), .plain_every_s = 10, .first_step = run.step});
    const double seconds_before = run.train_seconds;
    const int first_step = run.step;
    for (int step = run.step; step < steps; ++step) {
        if (step % eval_every == 0) {
            run.held_out.xs.push_back(step), run.held_out.ys.push_back(evaluate_edd(*model).first);
            if (!backend.cuda) run.fma_peak = std::max(run.fma_peak, fma_ceiling(pool));
        }
        const auto t0 = std::chrono::steady_clock::now();
        const WindowBatch w = random_windows(train_file, train_range, B, T, seed, static_cast<std::uint32_t>(step));
        const EddBatch batch = edd_batch(w, teacher(w), eo.block_length(seed, step), eo);
        const double loss = model->step(batch, schedule.at(step));
        run.record_step(loss, t0, seconds_before, progress, double(step + 1 - first_step) * B * T);
        if (run.step % options.checkpoint_every == 0 || run.step == steps) save_run(name, cfg, *model, run, hp_text);
    }
    progress.finish();
    const auto final_eval = evaluate_edd(*model);
    if (run.held_out.xs.empty() || run.held_out.xs.back() != steps)
        run.held_out.xs.push_back(steps), run.held_out.ys.push_back(final_eval.first);

    // Step 4: the checkpoint (model_type "edd", or a plain Llama for the VDM), chart and log, as shipped
    // (measured on the CPU trainer, the reference, whatever trained it).
    const Weights trained = model->state().params;
    if (eo.soft_prompt) save_edd_checkpoint(out, EddCheckpoint{cfg, trained, layer}, SaveFormat::kBF16);
    else save_checkpoint(out, cfg, trained, SaveFormat::kBF16);
    fs::copy_file("models/tokenizer.json", out / "tokenizer.json", fs::copy_options::overwrite_existing);
    write_svg_chart((out / "loss.svg").string(), name + (eo.kl ? ": KL to the target per token" : ": cross-entropy per token"),
                    std::vector<Series>{run.train_curve, Series{"held-out KL", run.held_out.xs, run.held_out.ys}},
                    ChartOptions{.x_label = "step", .y_label = "nats per token"});
    lm_training::EddSetup shipped_setup = setup;
    shipped_setup.initial = eo.soft_prompt ? load_edd_checkpoint(out).weights : load_checkpoint(out).weights;
    lm_training::CpuEddTrainer shipped(shipped_setup, pool);
    const auto bf16_eval = evaluate_edd(shipped);
    json::Object log;
    log.set("parameters", static_cast<std::int64_t>(n_params));
    log.set("target", target_name);
    log.set("target_layer", layer);
    log.set("soft_prompt", eo.soft_prompt);
    log.set("loss", eo.kl ? "forward KL" : "cross-entropy");
    log.set("freeze_embeddings", freeze);
    log_rates(log, run, steps, B, T, flops_per_token, backend);
    log.set("heldout_kl", bf16_eval.first);
    log.set("heldout_top1_agreement", bf16_eval.second);
    log.set("heldout_block_length", eo.soft_prompt ? eval_block : 0);
    log.set("heldout_tokens", static_cast<std::int64_t>(eval_windows) * T);
    std::ofstream(out / "train_log.json") << json::dump(json::Value(std::move(log)), 2) << "\n";
    std::printf("%s: held-out KL to the target %.3f nats/token, top-1 agreement %.3f (bf16 checkpoint; float32 "
                "before saving %.3f / %.3f), %.0f s, %s, wrote %s\n",
                name.c_str(), bf16_eval.first, bf16_eval.second, final_eval.first, final_eval.second, run.train_seconds,
                rate_summary(run, steps, B, T, flops_per_token, backend).c_str(), out.string().c_str());
    return 0;
}

/// EAGLE's feature drafter and FSPAD's (fspad.txt, "Training of FSPAD"): a connector and one decoder layer
/// beside the frozen target, trained on the target's features (its final normed state) with
/// L = w·L_t + L_f — soft cross-entropy to the target's law and SmoothL1 to its next feature — AdamW
/// β = (0.9, 0.95), gradient clipping 0.5. "feature" in train.json picks the connector ("fc": EAGLE,
/// "feature_sampler": FSPAD's FS) and partial_alignment (PAD): EAGLE, FSPAD and the FS-only / PAD-only
/// ablations train with the same code. Several names train side by side on the same windows (their
/// train.json must agree on target, data, steps and seed): the target's forward, most of a step's
/// cost, is computed once for all. No --resume: these runs are short.
///
/// --device cuda trains on the GPU (feature_trainer.hpp), --target-scale 110m|1b|7b against the widened
/// target (the demo target at a larger model's cost, the benchmark's: a simulation, labelled in the log),
/// --out DIR writes DIR/<name> instead of models/<name>, --steps / --batch override train.json's, and
/// --max-seconds stops the loop when the time is spent (the log says how many steps ran).
int make_feature(const std::vector<std::string>& names, const RunOptions& options) {
    using namespace feature_training;
    // Step 1: hyperparameters (shared: data and steps; per drafter: connector, PAD, loss weight, rates).
    struct Drafter {
        std::string name;
        fs::path dir, out;
        json::Value hp;
        std::string connector;
        bool pad = false;
        bool eagle_layout = false;  // "layout": "eagle": EAGLE-1/2's layer, without its end norms (exports to SGLang / vLLM)
        double token_weight = 0.1, clip = 0.5;
        float weight_decay = 0.0f;
        std::vector<std::string> frozen;
        CosineSchedule schedule;
        std::unique_ptr<FeatureTrainer> trainer;
        std::size_t n_params = 0;
        RunRecord run;
        Series train_t{"train L_t", {}, {}}, train_f{"train L_f", {}, {}}, held_t{"held-out L_t", {}, {}},
            held_f{"held-out L_f", {}, {}};
    };
    const Backend backend = backend_for(options, 0);
    const bool cuda = backend.cuda;
    std::vector<Drafter> ds(names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
        Drafter& d = ds[i];
        d.name = names[i];
        d.dir = fs::path("models") / d.name;
        d.out = options.out_dir(d.name);
        d.hp = json::parse(read_file(d.dir / "train.json"), (d.dir / "train.json").string());
        const json::Value& fo = d.hp.at("feature");
        d.connector = fo.at("connector").as_string();
        detail::require(d.connector == "fc" || d.connector == "feature_sampler", "train_demo", [&] {
            return (d.dir / "train.json").string() + ": feature.connector '" + d.connector + "' is neither fc nor feature_sampler";
        });
        d.pad = fo.at("partial_alignment").as_bool();
        if (const json::Value* layout = fo.find("layout")) {
            detail::require(layout->is_string() && layout->as_string() == "eagle", "train_demo", [&] {
                return (d.dir / "train.json").string() + ": feature.layout " + json::dump(*layout) +
                       " is not \"eagle\" (absent: the layer with its input and final norms)";
            });
            d.eagle_layout = true;
        }
        d.token_weight = fo.at("token_weight").as_double();
        d.clip = d.hp.at("grad_clip").as_double();
        d.weight_decay = static_cast<float>(d.hp.at("weight_decay").as_double());
        for (const char* shared : {"target", "steps", "batch", "seq_len", "seed", "threads", "eval_windows"})
            detail::require(json::dump(d.hp.at(shared)) == json::dump(ds[0].hp.at(shared)), "train_demo", [&] {
                return "models/" + d.name + "/train.json: '" + shared + "' differs from models/" + ds[0].name +
                       "'s; drafters trained together share the target, the data, the steps and the seed";
            });
    }
    const json::Value& hp = ds[0].hp;
    int steps = options.step_count(hp);
    const int steps_requested = steps;  // --max-seconds may fit fewer
    const int B = options.batch > 0 ? options.batch : static_cast<int>(hp.at("batch").as_int());
    const int T = static_cast<int>(hp.at("seq_len").as_int()), threads = static_cast<int>(hp.at("threads").as_int());
    const auto seed = static_cast<std::uint64_t>(hp.at("seed").as_int());
    const std::string target_name = hp.at("target").as_string();
    if (options.resume) std::printf("--resume is not supported for feature drafters; starting from step 0\n");
    ThreadPool pool(cuda ? static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) : threads);
    Checkpoint target_ck = load_checkpoint(fs::path("models") / target_name);
    std::string target_label = target_name;
    if (!options.target_scale.empty()) {  // the benchmark's widened target: the same outputs at a larger model's cost
        target_ck = widen(target_ck, widen_preset(options.target_scale), specdec::bench::kTargetWidenSeed);
        // The drafter borrows the target's head: an untied one is read into memory (widen defers it).
        if (!target_ck.config.tie_word_embeddings && target_ck.weights.lm_head.empty())
            if (const MatrixRows* rows = target_ck.weights.deferred ? target_ck.weights.deferred->find("lm_head.weight") : nullptr) {
                std::vector<float>& head = target_ck.weights.lm_head;
                head.resize(static_cast<std::size_t>(rows->m) * rows->k);
                for (int j = 0; j < rows->m; ++j) {
                    const RowRef r = rows->row(j);
                    for (int p = 0; p < rows->k; ++p)
                        head[static_cast<std::size_t>(j) * rows->k + p] = r.bf != nullptr ? to_float(r.bf[p]) : r.f32[p];
                }
            }
        target_label = target_name + " at " + options.target_scale + " cost (cost-scaled: a simulation, docs/widening.md)";
    }
    Teacher teacher;
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
    if (cuda) teacher = cuda_teacher(target_ck, T, pool);
#endif
    if (!cuda) {
        auto target = std::make_shared<CpuModel>(target_ck.config, target_ck.weights,
                                                 ModelOptions{.weight_format = options.target_scale.empty() ? WeightFormat::kF32 : WeightFormat::kBF16,
                                                              .pool = &pool});
        teacher = [target, &pool, layer = target_ck.config.num_hidden_layers](const WindowBatch& w) {
            return hidden_teacher(*target, pool, layer, w);
        };
    }
    const TokenFile train_file((kData / "train.bin").string()), test_file((kData / "test.bin").string());
    train_file.check_vocab(target_ck.config.vocab_size);
    const TokenRange train_range{0, train_file.size()}, test_range{0, test_file.size()};
    const int eval_windows = static_cast<int>(hp.at("eval_windows").as_int());
    std::vector<FeatureBatch> eval_set;  // held-out windows with the target's features and laws, computed once
    for (int first = 0; first < eval_windows; first += B) {
        const WindowBatch w = spaced_windows(test_file, test_range, T, eval_windows, first, std::min(B, eval_windows - first));
        eval_set.push_back(feature_batch(w, teacher(w), target_ck.weights.embed));
    }

    // Step 2: each drafter (embedding and head: the target's, frozen; layer and connector at random).
    const double fma_peak = cuda ? 0.0 : fma_ceiling(pool);
    const GpuInfo& gpu = backend.gpu;
    const auto make_trainer = [&](const FeatureCheckpoint& init, const Drafter& d) -> std::unique_ptr<FeatureTrainer> {
#if defined(SPECDEC_TRAIN_DEMO_CUDA)
        if (cuda) return cuda_feature_trainer(init, d.frozen, d.weight_decay);
#endif
        return std::make_unique<CpuFeatureTrainer>(init, pool, d.frozen, d.weight_decay);
    };
    double flops_per_token = 0.0;  // model FLOPs of one drafter's training step per token (the first drafter's)
    for (Drafter& d : ds) {
        d.schedule = schedule_from(d.hp, steps);
        const Connector kind = d.connector == "fc" ? Connector::kFc : Connector::kSampler;
        FeatureCheckpoint init = initial_feature_drafter(target_ck.config, target_ck.weights, kind, d.pad, seed,
                                                         static_cast<float>(d.hp.at("init_std").as_double()));
        init.config.identity_end_norms = d.eagle_layout;  // EAGLE-1/2's layer (cnets.py): no input norm on layer 0, no final norm
        const Config& cfg = init.config;
        d.frozen = {"model.embed_tokens.weight"};
        if (!cfg.tie_word_embeddings) d.frozen.push_back("lm_head.weight");
        if (d.eagle_layout) {  // the two norms the layout skips: kept (unread) at their initial ones
            d.frozen.push_back("model.norm.weight");
            d.frozen.push_back("model.layers.0.input_layernorm.weight");
        }
        d.n_params = parameter_count(init.weights, cfg) - init.weights.embed.size() - init.weights.lm_head.size() -
                     (d.eagle_layout ? 2 * static_cast<std::size_t>(cfg.hidden_size) : 0);
        std::size_t connector_params = 0;
        for_each_tensor(init.connector_weights, ConnectorShape{kind, cfg.hidden_size, init.sampler_size},
                        [&](const std::string&, const std::vector<float>& t, std::size_t) { connector_params += t.size(); });
        d.n_params += connector_params;
        // 3 x the layer's forward over windows of T - 1 rows, less the frozen head's weight gradient (never
        // computed), plus the connector's three products.
        if (&d == &ds[0])
            flops_per_token = 3.0 * forward_flops_per_token(cfg, T - 1) -
                              2.0 * double(cfg.vocab_size) * cfg.hidden_size + 6.0 * double(connector_params);
        d.trainer = make_trainer(init, d);
        d.run.fma_peak = fma_peak;
        std::printf("%s: %zu trained parameters (%s connector%s, one layer%s; %s's embedding and head frozen), L = %.2f "
                    "L_t + L_f, %d steps of %d x %d tokens, on %s\n",
                    d.name.c_str(), d.n_params, d.connector.c_str(), d.pad ? ", PAD" : "",
                    d.eagle_layout ? " without its end norms (EAGLE layout)" : "", target_label.c_str(), d.token_weight,
                    steps, B, T, cuda ? ("the GPU (" + gpu.name + ")").c_str() : (std::to_string(threads) + " threads").c_str());
    }
    // Held-out: L_t, L_f and how often the drafter's argmax is the target's (one step ahead, target features).
    struct Held {
        double token = 0, feature = 0, agree = 0;
    };
    const auto evaluate_feature = [&](FeatureTrainer& m, double token_weight) {
        Held h;
        for (const FeatureBatch& b : eval_set) {
            double top1 = 0.0;
            const FeatureLoss l = m.evaluate(b, token_weight, top1);
            h.token += l.token * b.B, h.feature += l.feature * b.B, h.agree += top1 * b.B;
        }
        h.token /= eval_windows, h.feature /= eval_windows, h.agree /= eval_windows;
        return h;
    };

    // Step 3: the loop: one target forward per step, then every drafter on the same batch. With --max-seconds
    // the run is fitted to the time after kFitAfter steps: the step count (and the schedule's length with it)
    // becomes what the measured rate allows, keeping a tenth of the time for the evaluations and the saves.
    const int eval_every = std::max(1, steps / 10);
    constexpr int kFitAfter = 5;
    const auto progress_line = [&](int first) {
        return std::make_unique<ProgressLine>(
            std::cerr, steps, ProgressOptions{.terminal = stderr_is_terminal(), .plain_every_s = 10, .first_step = first});
    };
    std::unique_ptr<ProgressLine> progress = progress_line(0);
    const auto t_loop = std::chrono::steady_clock::now();
    const auto loop_seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t_loop).count(); };
    double smooth = 0.0, teacher_seconds = 0.0, units_before = 0.0;
    int done = 0;
    for (int step = 0; step < steps; ++step) {
        if (options.max_seconds > 0 && step == kFitAfter && steps > kFitAfter) {
            const int fit = std::max(kFitAfter + 1, static_cast<int>(0.9 * options.max_seconds / (loop_seconds() / kFitAfter)));
            if (fit < steps) {
                std::printf("--max-seconds %.0f: %.2f s per step, so %d steps instead of %d (the schedule shortened with them)\n",
                            options.max_seconds, loop_seconds() / kFitAfter, fit, steps);
                steps = fit;
                for (Drafter& d : ds) d.schedule = schedule_from(d.hp, steps);
                progress->finish();
                progress = progress_line(kFitAfter);
                units_before = double(kFitAfter) * B * T;
            }
        }
        if (options.max_seconds > 0 && loop_seconds() > options.max_seconds) {
            std::printf("--max-seconds %.0f spent after %d of %d steps: stopping here\n", options.max_seconds, step, steps);
            break;
        }
        if (step % eval_every == 0)
            for (Drafter& d : ds) {
                const Held h = evaluate_feature(*d.trainer, d.token_weight);
                d.held_t.xs.push_back(step), d.held_t.ys.push_back(h.token);
                d.held_f.xs.push_back(step), d.held_f.ys.push_back(h.feature);
            }
        const auto t_teacher = std::chrono::steady_clock::now();
        const WindowBatch w = random_windows(train_file, train_range, B, T, seed, static_cast<std::uint32_t>(step));
        const FeatureBatch batch = feature_batch(w, teacher(w), target_ck.weights.embed);
        teacher_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_teacher).count();
        for (Drafter& d : ds) {
            const auto t0 = std::chrono::steady_clock::now();
            const FeatureLoss loss = d.trainer->step(batch, d.token_weight, d.clip, d.schedule.at(step));
            d.train_t.xs.push_back(step + 1), d.train_t.ys.push_back(loss.token);
            d.train_f.xs.push_back(step + 1), d.train_f.ys.push_back(loss.feature);
            d.run.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            d.run.step = step + 1;
            if (&d == &ds[0]) smooth = step == 0 ? loss.total : 0.95 * smooth + 0.05 * loss.total;
        }
        done = step + 1;
        progress->update(step + 1, smooth, double(step + 1) * B * T - units_before);
    }
    progress->finish();
    const double seconds = loop_seconds();

    // Step 4: each checkpoint (model_type "eagle" or "fspad"), the chart of L_t and L_f, a log, as shipped.
    for (Drafter& d : ds) {
        const Held final_eval = evaluate_feature(*d.trainer, d.token_weight);
        d.held_t.xs.push_back(done), d.held_t.ys.push_back(final_eval.token);
        d.held_f.xs.push_back(done), d.held_f.ys.push_back(final_eval.feature);
        save_feature_checkpoint(d.out, d.trainer->checkpoint(), SaveFormat::kBF16);
        fs::copy_file("models/tokenizer.json", d.out / "tokenizer.json", fs::copy_options::overwrite_existing);
        write_svg_chart((d.out / "loss.svg").string(),
                        d.name + ": L_t (soft cross-entropy, nats) and L_f (SmoothL1 to the target's feature)",
                        std::vector<Series>{d.train_t, d.train_f, d.held_t, d.held_f},
                        ChartOptions{.x_label = "step", .y_label = "loss per row"});
        const double product_flops = d.trainer->product_flops();
        d.trainer.reset();  // the shipped copy below takes its place (on the GPU: its memory)
        const std::unique_ptr<FeatureTrainer> shipped = make_trainer(load_feature_checkpoint(d.out), d);
        const Held bf16_eval = evaluate_feature(*shipped, d.token_weight);
        json::Object log;
        log.set("parameters_trained", static_cast<std::int64_t>(d.n_params));
        log.set("target", target_name);
        if (!options.target_scale.empty()) {
            log.set("target_scale", options.target_scale);
            log.set("target_label", target_label);
        }
        log.set("connector", d.connector);
        log.set("partial_alignment", d.pad);
        if (d.eagle_layout) log.set("layout", "eagle");
        log.set("token_weight", d.token_weight);
        log.set("device", cuda ? "cuda" : "cpu");
        log.set("machine", example::machine_name());
        log.set("steps", done);
        log.set("steps_requested", steps_requested);
        log.set("batch", B);
        log.set("seq_len", T);
        log.set("threads", cuda ? 0 : threads);
        log.set("step_seconds", d.run.step_seconds);  // this drafter's own updates
        log.set("teacher_seconds", teacher_seconds);  // the target's forwards, shared by the drafters trained together
        log.set("wall_seconds", seconds);
        const double tokens_per_second = double(done) * B * (T - 1) / d.run.step_seconds;
        log.set("tokens_per_second", tokens_per_second);  // rows trained per second of this drafter's steps
        log.set("model_flops_per_token", flops_per_token);
        if (cuda) {
            log.set("gpu", gpu.name);
            log.set("bf16_gemm_peak_tflops", gpu.bf16_tflops);  // measured: 8192^3 bf16 products through cuBLASLt
            log.set("mfu", tokens_per_second * flops_per_token / (gpu.bf16_tflops * 1e12));
            log.set("product_flops_per_second", product_flops / d.run.step_seconds);  // includes the evaluations' forwards
        } else {
            log.set("fma_peak_gflops", fma_peak);
            log.set("flops_utilization", tokens_per_second * flops_per_token / (fma_peak * 1e9));
        }
        log.set("trained_with", json::Array(names.begin(), names.end()));
        log.set("heldout_token_loss", bf16_eval.token);
        log.set("heldout_feature_loss", bf16_eval.feature);
        log.set("heldout_top1_agreement", bf16_eval.agree);
        log.set("heldout_tokens", static_cast<std::int64_t>(eval_windows) * T);
        std::ofstream(d.out / "train_log.json") << json::dump(json::Value(std::move(log)), 2) << "\n";
        std::printf("%s: held-out L_t %.3f, L_f %.4f, top-1 agreement %.3f (bf16 checkpoint; float32 before saving "
                    "%.3f / %.4f / %.3f), its updates %.0f s + the shared target %.0f s, wrote %s\n",
                    d.name.c_str(), bf16_eval.token, bf16_eval.feature, bf16_eval.agree, final_eval.token,
                    final_eval.feature, final_eval.agree, d.run.step_seconds, teacher_seconds, d.out.string().c_str());
        if (cuda)
            std::printf("%s: %.0f tokens/s, %.1f%% of the measured bf16 product rate (%.0f TFLOP/s on %s)\n", d.name.c_str(),
                        tokens_per_second, 100.0 * tokens_per_second * flops_per_token / (gpu.bf16_tflops * 1e12),
                        gpu.bf16_tflops, gpu.name.c_str());
    }
    return 0;
}

/// Max-Gram's bigram table from the training token file (the paper uses Wikipedia bigrams).
int make_bigram() {
    const auto t0 = std::chrono::steady_clock::now();
    const train::TokenFile corpus((kData / "train.bin").string());
    const Bigram b = Bigram::build(corpus, Tokenizer::load("models/tokenizer.json").vocab_size());
    b.save("models/bigram.json");
    const long known = std::count_if(b.next.begin(), b.next.end(), [](int t) { return t >= 0; });
    std::printf("bigram: %ld of %d tokens have a successor in %zu training tokens, %.2f s, wrote models/bigram.json\n",
                known, b.vocab_size, corpus.size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "tokenizer" && argc == 2) return make_tokenizer();
    if (what == "bigram" && argc == 2) return make_bigram();
    const bool feature = what == "eagle" || what == "fspad";
    if ((what == "model" || what == "glide" || what == "edd" || feature) && argc > 2) {
        std::vector<std::string> names;  // eagle|fspad: several names train together on one target forward per step
        RunOptions options;
        for (int i = 2; i < argc; ++i) {
            const std::string a = argv[i];
            const auto value = [&]() -> std::string {
                detail::require(i + 1 < argc, "train_demo", [&] { return a + " needs a value"; });
                return argv[++i];
            };
            // A count is a whole number: "0.5" or "1e10" read as a double and cast to int would give 0 or
            // (undefined) INT_MIN, which step_count takes for "no override": train.json's whole run.
            const auto count = [&](const std::string& v) {
                int x = 0;
                const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
                detail::require(ec == std::errc() && end == v.data() + v.size() && x > 0, "train_demo", [&] {
                    return a + " " + v + ": expected a whole number in [1, " + std::to_string(INT_MAX) + "]";
                });
                return x;
            };
            const auto seconds = [&](const std::string& v) {
                char* end = nullptr;
                const double x = std::strtod(v.c_str(), &end);
                detail::require(end != v.c_str() && *end == '\0' && std::isfinite(x) && x > 0, "train_demo",
                                [&] { return a + " " + v + ": expected a positive number of seconds"; });
                return x;
            };
            const auto feature_only = [&] {
                detail::require(feature, "train_demo", [&] { return a + " is for eagle|fspad only, not " + what; });
            };
            if (a == "--resume") options.resume = true;
            else if (a == "--checkpoint-every") options.checkpoint_every = count(value());
            else if (a == "--device") {
                options.device = value();
                detail::require(options.device == "cpu" || options.device == "cuda", "train_demo",
                                [&] { return "--device '" + options.device + "' is neither cpu nor cuda"; });
            }
            else if (a == "--out") options.out = value();
            else if (a == "--steps") options.steps = count(value());
            else if (a == "--target-scale") feature_only(), options.target_scale = value();
            else if (a == "--batch") feature_only(), options.batch = count(value());
            else if (a == "--max-seconds") feature_only(), options.max_seconds = seconds(value());
            else if (a.rfind("--", 0) == 0) detail::fail("train_demo", "unknown option '" + a + "' for " + what);
            else names.push_back(a);
        }
        detail::require(!names.empty() && (feature || names.size() == 1), "train_demo", [&] {
            return what + " takes " + (feature ? "one or more names" : "one name") + ", got " + std::to_string(names.size());
        });
        detail::require(!(options.resume && options.steps > 0), "train_demo", [] {
            return std::string("--resume continues train.json's run: it does not take --steps");
        });
        detail::require(fs::exists(kData / "train.bin") && fs::exists(kData / "test.bin"), "train_demo", [] {
            return "no token files in " + kData.string() + " (train.bin, test.bin): run `train_demo tokenizer` first, "
                   "from the repository root (scripts/train_models.sh runs every step in order)";
        });
        if (what == "model") return make_model(names[0], options);
        if (what == "glide") return make_glide(names[0], options);
        if (what == "edd") return make_edd(names[0], options);
        return make_feature(names, options);
    }
    std::fprintf(stderr, "usage: train_demo tokenizer | train_demo bigram\n"
                         "       train_demo model|glide|edd <name> [--device cpu|cuda] [--resume] [--checkpoint-every N]\n"
                         "                  [--out DIR] [--steps N]\n"
                         "       train_demo eagle|fspad <name> [<name> ...] [--device cpu|cuda] [--target-scale 110m|1b|7b]\n"
                         "                  [--out DIR] [--steps N] [--batch N] [--max-seconds S]   (from the repository root)\n");
    return 2;
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run: bash scripts/train_models.sh (all), or the commands above. Prints the sizes, a progress line
// with loss, tokens/s and ETA, and the held-out perplexity of each model; see docs/models.md.

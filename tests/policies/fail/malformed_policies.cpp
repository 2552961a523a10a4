// Seven malformed compositions, each missing one thing. This file must fail to compile, with one message
// per composition that names what is missing (check_messages.cmake compiles it and looks for each).
// Never built into a program.
#define SPECDEC_DECODING_ONLY
#include "specdec.hpp"

using namespace specdec;

namespace {

struct TokenDrafter {  // well-formed, for the compositions whose fault lies elsewhere
    int vocab_size() const { return 64; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    Draft draft(std::span<const int>, int, const StepContext&) { return {}; }
};

template <class Target, class P, class B, class A>
void run(Target& target) {
    P proposer;
    B builder;
    TreeVerifier verifier;
    A acceptor;
    speculative_generate(target, proposer, builder, verifier, acceptor, std::vector<int>{1}, GenerateOptions{});
}

struct NoObserve {  // 1: a proposer without observe()
    int vocab_size() const { return 64; }
    void start(std::span<const int>) {}
    Draft draft(std::span<const int>, int, const StepContext&) { return {}; }
};

struct DraftsIds {  // 2: draft() returns bare token ids, not a Draft
    int vocab_size() const { return 64; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    std::vector<int> draft(std::span<const int>, int, const StepContext&) { return {}; }
};

struct NoContext {  // 3: an acceptor that forgot the StepContext
    AcceptResult accept(const Tree&, Rows) { return {}; }
};

struct ReturnsPath {  // 6: an acceptor returning a bare path, passed as a temporary
    std::vector<int> accept(const Tree&, Rows, const StepContext&) { return {}; }
};

struct NoTruncate {  // 5: a target without truncate()
    int vocab_size() const { return 64; }
    int cache_len() const { return 0; }
    int context_size() const { return 64; }
    Rows forward(const Tree&, int) { return {}; }
    void commit(std::span<const int>) {}
    void reset() {}
};

}  // namespace

void malformed(CpuModel& target, NoTruncate& other) {
    run<CpuModel, NoObserve, Chain, GreedyMatch>(target);
    run<CpuModel, DraftsIds, Chain, GreedyMatch>(target);
    run<CpuModel, TokenDrafter, Chain, NoContext>(target);
    run<CpuModel, TokenDrafter, KAryTree, GreedyMatch>(target);  // 4: KAryTree drives only ScoresNodes proposers
    run<NoTruncate, TokenDrafter, Chain, GreedyMatch>(other);
    // 6: policies written in the call reach the same member-by-member checks.
    speculative_generate(target, TokenDrafter{}, Chain{.gamma = 2}, TreeVerifier{}, ReturnsPath{}, std::vector<int>{1},
                         GenerateOptions{});
    // 7: target-initialised MCSD's roots come from the target's law: a drafter choosing its own tokens
    // after a pending root cannot start such a step
    run<CpuModel, TokenDrafter, TargetInitialisedTree, LossyTargetInitialisedSampling>(target);
}

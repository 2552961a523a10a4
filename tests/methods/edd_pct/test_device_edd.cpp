// EDD's drafter trained by the device trainer, its kernels run on the host (HostDevice): the same loss,
// top-1 agreement and gradients as edd_forward_loss over TrainableLlama, with and without the soft prompt
// (the dual-block mask), forward KL and cross-entropy, and with the embedding and final norm frozen.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "catch.hpp"
#include "device_checks.hpp"
#include "helpers.hpp"
#include "detail/methods/edd_pct/device_edd.hpp"
#include "detail/train/host_device.hpp"

namespace test_device_edd {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
using test::relative_gap;

TEST_CASE("the device EDD drafter, run on the host, has edd_forward_loss's loss and gradients", "[edd][device]") {
    Config tc = test::tiny_config(true, 24);
    tc.num_hidden_layers = 4;
    const Config dc = edd_drafter_config(tc);
    const bool soft_prompt = GENERATE(true, false);
    const bool kl = GENERATE(true, false);
    const bool freeze = GENERATE(false, true);
    CAPTURE(soft_prompt, kl, freeze);
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, n = 7;
    const WindowBatch w{B, n, test::window_tokens(B * n, tc.vocab_size, 5), test::window_tokens(B * n, tc.vocab_size, 6), {0, 0}};
    const EddBatch batch = edd_batch(w, edd_teacher(target, pool, edd_hidden_layer(tc), w), 3,
                                     EddTrainOptions{.soft_prompt = soft_prompt, .kl = kl});
    const Weights init = edd_initial_weights(dc, tw, 31, 0.3f);
    TrainableLlama ref(dc, init, pool, TrainOptions{.reference = true});
    HostDevice dev(pool);
    const std::vector<std::string> frozen =
        freeze ? std::vector<std::string>{"model.embed_tokens.weight", "model.norm.weight"} : std::vector<std::string>{};
    DeviceEdd<HostDevice> d(dev, dc, init, frozen);

    const double rl = edd_forward_loss(ref, batch, kl);
    ref.backward();
    const double l = d.forward_loss(batch, kl);
    d.model().backward();
    CHECK(std::abs(l - rl) <= 1e-5 * std::abs(rl));
    CHECK(d.top1_agreement(batch) == top1_agreement(ref, batch));
    const Weights g = d.model().grads();
    const auto rg = test::named_tensors(ref.grads(), dc);
    std::size_t i = 0;
    for_each_tensor(g, dc, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        INFO(name);
        if (std::find(frozen.begin(), frozen.end(), name) != frozen.end())
            CHECK(std::all_of(t.begin(), t.end(), [](float x) { return x == 0.0f; }));
        else
            CHECK(relative_gap(t, rg[i].second) < 1e-4);
        ++i;
    });
}

}  // namespace test_device_edd

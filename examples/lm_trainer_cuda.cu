// examples/lm_trainer_cuda.cu — train_demo's small LM, EDD and GLIDE drafters on the GPU: device_trainers.hpp's
// trainers on CudaDevice, the GLIDE target as a CudaModel (lm_trainer.hpp says what each piece does).
#include <memory>

#include "device_trainers.hpp"
#include "feature_trainer.hpp"
#include "lm_trainer.hpp"
#include "specdec.hpp"

namespace lm_training {

using namespace specdec;
using namespace specdec::train;
using feature_training::cuda_context;

namespace {

CudaDevice& cuda_device() {
    static CudaDevice dev(cuda_context());  // one cuBLASLt plan cache for the run
    return dev;
}

/// The GLIDE trainer with the CudaModel it reads: the model is built first (a base), then the trainer on it.
struct CudaTarget {
    CudaModel model;
};
class CudaGlideTrainer final : private CudaTarget, public DeviceGlideTrainer<CudaDevice, CudaModel> {
public:
    CudaGlideTrainer(const GlideSetup& s, const Checkpoint& target, int max_window)
        : CudaTarget{CudaModel(target.config, target.weights, cuda_context(),
                               CudaModelOptions{.max_tree_nodes = max_window, .max_context = max_window})},
          DeviceGlideTrainer(cuda_device(), s, model) {}
};

}  // namespace

std::unique_ptr<ModelTrainer> cuda_model_trainer(const ModelSetup& s) {
    return std::make_unique<DeviceModelTrainer<CudaDevice>>(cuda_device(), s);
}
std::unique_ptr<EddTrainer> cuda_edd_trainer(const EddSetup& s) {
    return std::make_unique<DeviceEddTrainer<CudaDevice>>(cuda_device(), s);
}
std::unique_ptr<GlideTrainer> cuda_glide_trainer(const GlideSetup& s, const Checkpoint& target, int max_window) {
    return std::make_unique<CudaGlideTrainer>(s, target, max_window);
}

}  // namespace lm_training

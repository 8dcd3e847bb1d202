#include "edgesgd/core/codec_registry.h"

#include "edgesgd/core/check.h"

namespace edgesgd {

namespace internal {
void CodecLeftOutOfBuild() {
  EDGESGD_INTERNAL_FATAL("parameters of a codec this build leaves out (EDGESGD_CODECS)");
}

Result<PayloadShape> EncodedShapeOutOfLine(const CodecParams& params, const TensorLayout& layout) {
  return VisitCodec(params, [&layout]<typename Codec>(const typename Codec::Params& own) {
    return Codec::Shape(own, layout);
  });
}
}  // namespace internal

const CodecRegistry& AllCodecs() {
  static constexpr CodecRegistry kRegistry(internal::OpsOfList<KnownCodecs>::kOps);
  return kRegistry;
}

}  // namespace edgesgd

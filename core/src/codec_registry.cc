#include "edgesgd/core/codec_registry.h"

namespace edgesgd {

namespace internal {
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

#include "edgesgd/core/codec_registry.h"

namespace edgesgd {

const CodecRegistry& AllCodecs() {
  static constexpr CodecRegistry kRegistry(internal::OpsOfList<KnownCodecs>::kOps);
  return kRegistry;
}

}  // namespace edgesgd

#pragma once

// Writers of the files the data-file readers take — gzip (stored deflate blocks, so tests can
// craft broken files without zlib's API), IDX and .npy — for the reader tests and the fuzz
// targets. Header-only, no GoogleTest.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace edgesgd::data_files {

using Bytes = std::vector<unsigned char>;

inline std::uint32_t Crc32(const Bytes& bytes) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline void PutLittle(Bytes& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

inline void PutBig32(Bytes& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<unsigned char>(value >> shift));
  }
}

// A gzip member holding `data` in stored blocks, with its CRC and size.
inline Bytes Gzip(const Bytes& data) {
  Bytes out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  std::size_t done = 0;
  do {
    const std::size_t length = std::min<std::size_t>(data.size() - done, 65535);
    const bool last = done + length == data.size();
    out.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    out.push_back(static_cast<unsigned char>(length));
    out.push_back(static_cast<unsigned char>(length >> 8));
    out.push_back(static_cast<unsigned char>(~length));
    out.push_back(static_cast<unsigned char>(~length >> 8));
    out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(done),
               data.begin() + static_cast<std::ptrdiff_t>(done + length));
    done += length;
  } while (done < data.size());
  PutLittle(out, Crc32(data), 4);
  PutLittle(out, data.size(), 4);
  return out;
}

// IDX images: magic, count, rows, cols, then `pixel_images` images of pixel value i % 256.
inline Bytes ImagesIdx(std::uint32_t magic, std::uint32_t count, std::uint32_t rows,
                       std::uint32_t cols, std::size_t pixel_images) {
  Bytes out;
  PutBig32(out, magic);
  PutBig32(out, count);
  PutBig32(out, rows);
  PutBig32(out, cols);
  for (std::size_t i = 0; i < pixel_images * rows * cols; ++i) {
    out.push_back(static_cast<unsigned char>(i % 256));
  }
  return out;
}

// IDX labels: magic, count, the labels.
inline Bytes LabelsIdx(std::uint32_t magic, const Bytes& labels) {
  Bytes out;
  PutBig32(out, magic);
  PutBig32(out, static_cast<std::uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  return out;
}

// A version 1.0 .npy file: the header dict numpy writes for `descr` and `shape` (e.g. "(3, 2)"),
// padded to 64 bytes, then `data`.
inline Bytes Npy(const std::string& descr, const std::string& shape, const Bytes& data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  PutLittle(out, header.size(), 2);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// The little-endian bytes of `values` (of any arithmetic type).
template <typename T>
Bytes LittleEndian(const std::vector<T>& values) {
  Bytes out;
  for (const T value : values) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));  // the hosts edgesgd tests on are little-endian
    for (const unsigned char byte : raw) out.push_back(byte);
  }
  return out;
}

// Writes `bytes` to `path`; false when it cannot.
inline bool WriteBytes(const std::string& path, const Bytes& bytes) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return false;
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  return std::fclose(file) == 0 && written;
}

}  // namespace edgesgd::data_files

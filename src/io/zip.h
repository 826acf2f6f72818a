// Reading and writing zip archives through libzip, for NumPy .npz files (a zip of .npy members,
// stored or deflated) and Keras .keras archives (stored members). Not a general archive API.
// Without libzip in the build every function but zip_supported() throws DataError saying so.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rnntrain {

// True when the build found libzip (RNNTRAIN_HAVE_LIBZIP).
bool zip_supported();

class ZipReader {
 public:
  explicit ZipReader(const std::string& path);  // DataError: missing, not a zip, damaged
  ~ZipReader();
  ZipReader(ZipReader&&) noexcept;
  ZipReader& operator=(ZipReader&&) noexcept;

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;     // members, in archive order
  bool has(const std::string& member) const;
  uint64_t size(const std::string& member) const;     // uncompressed size as the archive declares it; DataError if missing
  // The member's bytes; DataError if missing or damaged, or if its declared size is more than the
  // archive could hold or memory can take (checked before allocating).
  std::string read(const std::string& member) const;

 private:
  void check_members() const;  // DataError for a duplicate, unsafe or oddly compressed member
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

// Writes an archive of (member name, bytes); deflate = false stores the members uncompressed.
void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members,
               bool deflate);

}  // namespace rnntrain

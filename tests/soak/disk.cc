#include "disk.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

namespace ichido::soak {

std::string mount_tmpfs(const std::string& dir, int size_mib) {
  const std::string opts = "size=" + std::to_string(size_mib) + "m,mode=0700";
  if (::mount("tmpfs", dir.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
    return "mount -t tmpfs -o " + opts + " tmpfs " + dir + ": " + std::strerror(errno);
  }
  return "";
}

std::string unmount(const std::string& dir) {
  if (::umount2(dir.c_str(), 0) == 0) return "";
  if (::umount2(dir.c_str(), MNT_DETACH) == 0) return "";
  return "umount " + dir + ": " + std::strerror(errno);
}

long long fill_until_full(const std::string& path, std::string* error) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = "cannot create " + path + ": " + std::strerror(errno);
    return -1;
  }
  std::vector<char> buf(1 << 20, 'x');
  long long total = 0;
  for (std::size_t chunk : {std::size_t{1} << 20, std::size_t{4096}, std::size_t{512}}) {
    for (;;) {
      const ssize_t n = ::write(fd, buf.data(), chunk);
      if (n > 0) {
        total += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != ENOSPC) {
        *error = "write " + path + ": " + std::strerror(errno);
        ::close(fd);
        return -1;
      }
      break;  // ENOSPC (or a zero-byte write): try a smaller chunk
    }
  }
  ::fsync(fd);
  ::close(fd);
  return total;
}

std::string copy_dir(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive, ec);
  return ec ? "copy " + from + " to " + to + ": " + ec.message() : "";
}

std::string scribble(const std::string& path, std::int64_t offset, std::int64_t length,
                     std::uint64_t seed) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path + ": " + std::strerror(errno);
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(length));
  for (auto& b : bytes) b = static_cast<unsigned char>(rng());
  const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), offset);
  const std::string err =
      n == static_cast<ssize_t>(bytes.size()) ? "" : "pwrite " + path + ": " + std::strerror(errno);
  ::fsync(fd);
  ::close(fd);
  return err;
}

std::int64_t file_size_of(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<std::int64_t>(st.st_size) : -1;
}

}  // namespace ichido::soak

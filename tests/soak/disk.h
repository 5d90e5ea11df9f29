// File-system helpers of the soak run: a small tmpfs for the data directory (so that the disk can
// be filled without touching the machine's disks), filling it, copying and damaging data dirs.
#pragma once

#include <cstdint>
#include <string>

namespace ichido::soak {

// Mounts a tmpfs of `size_mib` MiB on the existing directory `dir`. "" on success, else why not.
std::string mount_tmpfs(const std::string& dir, int size_mib);
// Unmounts `dir` (lazily if busy). "" on success.
std::string unmount(const std::string& dir);

// Creates `path` and writes to it until the file system reports ENOSPC (1 MiB, then 4 KiB, then
// 512-byte writes), then fsyncs it. Returns the bytes written, or -1 with `error` when the
// file system failed otherwise.
long long fill_until_full(const std::string& path, std::string* error);

// Recursively copies directory `from` to `to` (which must not exist). "" on success.
std::string copy_dir(const std::string& from, const std::string& to);

// Overwrites `length` bytes at `offset` of `path` with pseudo-random bytes from `seed`.
// "" on success.
std::string scribble(const std::string& path, std::int64_t offset, std::int64_t length,
                     std::uint64_t seed);

std::int64_t file_size_of(const std::string& path);  // -1 when missing

}  // namespace ichido::soak

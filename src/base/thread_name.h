// Thread names: what `top -H`, `ps -L`, perf and gdb show for each of the server's threads
// (`ichido-writer`, `ichido-io-1`, ...; README "Threads on a small machine").
// Thread-safety: names the calling thread only; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace ichido {

// Names the calling thread. Linux keeps at most 15 bytes of a name: a longer one is cut there
// (so the names given stay within it). Best effort: a platform without thread names, or a
// failure to set one, leaves the name as it was — a name is for people reading a process list,
// and nothing depends on it.
void name_this_thread(std::string_view name);

// A thread that names itself `name`, then runs `fn`.
template <class Fn>
std::thread named_thread(std::string name, Fn fn) {
  return std::thread([name = std::move(name), fn = std::move(fn)]() mutable {
    name_this_thread(name);
    fn();
  });
}

}  // namespace ichido

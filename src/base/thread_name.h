// Thread names: what `top -H`, `ps -L`, perf and gdb show for each of the server's threads
// (`ichido-writer`, `ichido-io-1`, ...; README "Threads on a small machine").
// Thread-safety: any thread may name any thread it holds.
#pragma once

#include <string>
#include <string_view>
#include <thread>
#include <utility>

namespace ichido {

// Names thread `t` (running, not yet joined). Linux keeps at most 15 bytes of a name: a longer
// one is cut there (so the names given stay within it). Best effort: a platform without thread
// names, or a failure to set one, leaves the name as it was — a name is for people reading a
// process list, and nothing depends on it.
void name_thread(std::thread& t, std::string_view name);

// Names the calling thread. For a thread someone else started (std::async's): called first
// thing, so that the name it inherited from its creator (Linux copies it) is not seen for longer.
void name_this_thread(std::string_view name);

// A thread running `fn`, named `name` before this returns: whoever lists the process's threads
// after a named_thread() call sees the name, never the creator's it starts with.
template <class Fn>
std::thread named_thread(std::string_view name, Fn fn) {
  std::thread t(std::move(fn));
  name_thread(t, name);
  return t;
}

}  // namespace ichido

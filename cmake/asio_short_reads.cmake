# Asio's reactor, taught that a short read drained the socket (decision 142).
#
# Asio 1.81 starts every socket read with a speculative recv(), and it stops doing so only after
# a read that returned end of file. So after each answer, the read for the connection's next
# request is first tried at once, before the client can have sent it: one recv() a request that
# fails with EAGAIN (≈ 1.2 µs on the virtual machines measured), on top of the one that reads
# the request. A read that returns fewer bytes than it asked for on a TCP socket has emptied the
# socket's receive queue, and any byte that arrives after it raises a new edge-triggered epoll
# event — so such a read can count as "exhausted", as nginx counts it (ngx_unix_recv): the next
# read waits in the reactor for the event instead of trying first.
#
# One case needs care: a peer that sent its request and its FIN together (a half-close). The
# short read takes the data and the FIN; no event follows, and the next read would wait for
# ever. So sockets are registered with EPOLLRDHUP too, and once an event reports the peer's
# shutdown the descriptor stays speculative (a read then finds the end of file at once). If the
# read took the FIN before that event was seen, the event is still pending and re-enables the
# read when it arrives.
#
# The patch is applied to copies of three headers of the Boost found by find_package, written
# under the build directory, and that directory is put before the system's headers for every
# target that uses Asio (ichido_boost) — all or nothing: if any expected text is missing (another
# Boost version), nothing is patched, a warning says so, and Asio works as shipped.
#
# ichido_patch_asio(<include dir of Boost> <output dir> <result variable>)
function(ichido_patch_asio boost_include out_dir result_var)
  set(${result_var} FALSE PARENT_SCOPE)
  set(recv_op "boost/asio/detail/reactive_socket_recv_op.hpp")
  set(reactor_hpp "boost/asio/detail/epoll_reactor.hpp")
  set(reactor_ipp "boost/asio/detail/impl/epoll_reactor.ipp")

  # Each edit: a file, the exact text expected there once, its replacement. (Variables, not a
  # list: the texts hold semicolons.)
  # 1. A stream read that returns fewer bytes than asked for (and no error) is exhausted.
  set(e1_file "${recv_op}")
  set(e1_old "        if (o->bytes_transferred_ == 0)\n          result = done_and_exhausted;")
  set(e1_new "        if (o->bytes_transferred_ == 0\n            || (!o->ec_ && o->bytes_transferred_\n              < boost::asio::buffer_size(o->buffers_))) // ichido: short read\n          result = done_and_exhausted;")
  # 2. The descriptor remembers that an event reported the peer's shutdown.
  set(e2_file "${reactor_hpp}")
  set(e2_old "    bool try_speculative_[max_ops];\n    bool shutdown_;\n")
  set(e2_new "    bool try_speculative_[max_ops];\n    bool shutdown_;\n    bool peer_shut_; // ichido: an event reported EPOLLRDHUP\n")
  # 3. Sockets are registered for EPOLLRDHUP; the flag starts clear.
  set(e3_file "${reactor_ipp}")
  set(e3_old "    descriptor_data->shutdown_ = false;\n    for (int i = 0; i < max_ops; ++i)\n      descriptor_data->try_speculative_[i] = true;\n  }\n\n  epoll_event ev = { 0, { 0 } };\n  ev.events = EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLPRI | EPOLLET;\n  descriptor_data->registered_events_ = ev.events;\n  ev.data.ptr = descriptor_data;\n  int result = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, descriptor, &ev);\n  if (result != 0)\n  {\n    if (errno == EPERM)")
  set(e3_new "    descriptor_data->shutdown_ = false;\n    descriptor_data->peer_shut_ = false; // ichido\n    for (int i = 0; i < max_ops; ++i)\n      descriptor_data->try_speculative_[i] = true;\n  }\n\n  epoll_event ev = { 0, { 0 } };\n  ev.events = EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLPRI | EPOLLET | EPOLLRDHUP; // ichido\n  descriptor_data->registered_events_ = ev.events;\n  ev.data.ptr = descriptor_data;\n  int result = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, descriptor, &ev);\n  if (result != 0)\n  {\n    if (errno == EPERM)")
  # 4. Internal descriptors: the flag starts clear (they are not sockets).
  set(e4_file "${reactor_ipp}")
  set(e4_old "    descriptor_data->shutdown_ = false;\n    descriptor_data->op_queue_[op_type].push(op);")
  set(e4_new "    descriptor_data->shutdown_ = false;\n    descriptor_data->peer_shut_ = false; // ichido\n    descriptor_data->op_queue_[op_type].push(op);")
  # 5. A speculative read that exhausts the socket stops speculation only if the peer is there.
  set(e5_file "${reactor_ipp}")
  set(e5_old "          if (status == reactor_op::done_and_exhausted)\n            if (descriptor_data->registered_events_ != 0)\n              descriptor_data->try_speculative_[op_type] = false;")
  set(e5_new "          if (status == reactor_op::done_and_exhausted)\n            if (descriptor_data->registered_events_ != 0\n                && !descriptor_data->peer_shut_) // ichido\n              descriptor_data->try_speculative_[op_type] = false;")
  # 6. An event: note the peer's shutdown first; an exhausting read then stops speculation
  #    only while the peer is there.
  set(e6_file "${reactor_ipp}")
  set(e6_old "  static const int flag[max_ops] = { EPOLLIN, EPOLLOUT, EPOLLPRI };\n")
  set(e6_new "  static const int flag[max_ops] = { EPOLLIN, EPOLLOUT, EPOLLPRI };\n  if (events & EPOLLRDHUP) peer_shut_ = true; // ichido\n")
  set(e7_file "${reactor_ipp}")
  set(e7_old "          if (status == reactor_op::done_and_exhausted)\n          {\n            try_speculative_[j] = false;\n            break;\n          }")
  set(e7_new "          if (status == reactor_op::done_and_exhausted)\n          {\n            if (!peer_shut_) // ichido\n              try_speculative_[j] = false;\n            break;\n          }")
  set(edit_count 7)

  set(files "${recv_op}" "${reactor_hpp}" "${reactor_ipp}")
  foreach(f IN LISTS files)
    if(NOT EXISTS "${boost_include}/${f}")
      message(WARNING "Asio short-read patch not applied: ${boost_include}/${f} not found")
      return()
    endif()
    # A Boost upgrade re-runs CMake, so the copies never mix one version's code with another's.
    set_property(DIRECTORY "${PROJECT_SOURCE_DIR}" APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
                 "${boost_include}/${f}")
    file(READ "${boost_include}/${f}" text)
    string(MAKE_C_IDENTIFIER "${f}" id)
    set(content_${id} "${text}")
  endforeach()

  foreach(i RANGE 1 ${edit_count})
    set(f "${e${i}_file}")
    set(old "${e${i}_old}")
    set(new "${e${i}_new}")
    string(MAKE_C_IDENTIFIER "${f}" id)
    set(text "${content_${id}}")
    string(FIND "${text}" "${old}" at)
    if(at EQUAL -1)
      message(WARNING "Asio short-read patch not applied: ${f} of this Boost does not have the "
                      "expected text (edit ${i}); Asio's reads stay as shipped")
      return()
    endif()
    string(LENGTH "${old}" old_len)
    math(EXPR after "${at} + ${old_len}")
    string(SUBSTRING "${text}" ${after} -1 rest)
    string(FIND "${rest}" "${old}" again)
    if(NOT again EQUAL -1)
      message(WARNING "Asio short-read patch not applied: ${f}: edit ${i}'s text is not unique")
      return()
    endif()
    string(REPLACE "${old}" "${new}" text "${text}")
    set(content_${id} "${text}")
  endforeach()

  foreach(f IN LISTS files)
    string(MAKE_C_IDENTIFIER "${f}" id)
    set(banner "// Patched by ichido (cmake/asio_short_reads.cmake) from ${boost_include}/${f}.\n")
    # Written only when changed, so a re-configure does not rebuild everything.
    set(path "${out_dir}/${f}")
    set(want "${banner}${content_${id}}")
    if(EXISTS "${path}")
      file(READ "${path}" have)
    else()
      set(have "")
    endif()
    if(NOT have STREQUAL want)
      file(WRITE "${path}" "${want}")
    endif()
  endforeach()
  set(${result_var} TRUE PARENT_SCOPE)
endfunction()

#!/bin/sh
# tether COMMAND ARGS...: runs COMMAND and SIGKILLs it as soon as our stdin reaches end of file,
# i.e. when the test process that started us (holding the other end of the pipe) is gone, even
# when it was itself killed with SIGKILL (a ctest timeout). Exits with COMMAND's status.
# Prints "tether: pid N" on stderr first, so the test can signal COMMAND itself.
exec 3<&0 # a background job's stdin would be /dev/null: keep the pipe on fd 3
"$@" </dev/null 3<&- &
child=$!
echo "tether: pid $child" >&2
(
  while read -r _; do :; done <&3
  kill -9 "$child" 2>/dev/null
) &
watcher=$!
exec 3<&-
wait "$child"
rc=$?
kill "$watcher" 2>/dev/null
exit $rc

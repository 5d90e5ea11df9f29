// Must NOT compile: the service layer talks to stores only through include/ichido/store.h.
#include "store/memory/memory_store.h"

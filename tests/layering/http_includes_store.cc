// Must NOT compile: the http layer may not include a store header (tests/layering/CMakeLists.txt).
#include "store/sqlite/sqlite_store.h"

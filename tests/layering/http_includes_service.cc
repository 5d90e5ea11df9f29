// Must compile: the control for http_includes_store.cc (the http layer sees the service layer).
#include "service/lock_service.h"

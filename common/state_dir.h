// Where rgpu's programs keep a user's own state (the server's operator key file): $RGPU_STATE_DIR,
// or else ~/.rgpu. Thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace rgpu {

// The directory, created (mode 0700) when missing; kUnavailable when it cannot be, or when
// neither RGPU_STATE_DIR nor HOME is set.
Status UserStateDir(std::string* dir);

}  // namespace rgpu

#include "common/state_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace rgpu {

Status UserStateDir(std::string* dir) {
  const char* configured = getenv("RGPU_STATE_DIR");
  const char* home = getenv("HOME");
  if (configured != nullptr && configured[0] != '\0') {
    *dir = configured;
  } else if (home != nullptr && home[0] != '\0') {
    *dir = std::string(home) + "/.rgpu";
  } else {
    return Unavailable("neither RGPU_STATE_DIR nor HOME is set");
  }
  if (mkdir(dir->c_str(), 0700) != 0 && errno != EEXIST) {
    return Unavailable("cannot create " + *dir + ": " + strerror(errno));
  }
  return Status::Ok();
}

}  // namespace rgpu

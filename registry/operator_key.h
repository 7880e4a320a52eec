// The operator's key file: where rgpu-registry keeps its operator credential when none is given
// on the command line, as PostgreSQL and Vault do with theirs. Operator calls (tenants,
// providers, revocation, every tenant's usage and bills) always need the key.
#pragma once

#include <string>

#include "common/status.h"

namespace rgpu::registry {

// Reads the key in `path` or, when there is no such file, creates it with a new random key,
// readable and writable by its owner only (mode 0600), and sets `created`. Refuses a file that is
// not a regular file owned by this user, or that others may read or write (PermissionDenied,
// saying how to fix it), and one holding fewer than 16 characters.
Status LoadOrCreateOperatorKey(const std::string& path, std::string* key, bool* created);

}  // namespace rgpu::registry

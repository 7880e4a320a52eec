// The in-process transport (local://NAME): a Channel between two threads of one process, for a
// server that runs inside the tenant's own process (the software GPU as the program's libcuda,
// server/local_server.h). Nothing leaves the process: a message is a header and a copy of its
// payload on a queue guarded by one mutex per connection. Receive watches for the other end's
// news without the lock for ChannelOptions::poll_us before it sleeps on a condition variable
// (which a sender signals only when a receiver sleeps there).
//
// Threading: as Channel says (one thread per end at a time; Abandon from any thread). Every
// message is copied when it is sent, so Send and Post return with the payload reusable and
// Flush has nothing to wait for; neither end ever waits on the other to send, so two ends
// sending at once never deadlock.
//
// Listeners are named: a process-wide table maps NAME to the one listener by that name. The
// table belongs to the copy of this code that a library carries, so both ends must be made by
// the same library (ConnectLocalChannel and CreateLocalListener of one copy).
#pragma once

#include <memory>

#include "transport/channel.h"

namespace rgpu {

// Connects to the listener named url.host in this process. kUnavailable when there is none.
// The connection waits in the listener's queue until accepted; messages sent meanwhile queue up.
Status ConnectLocalChannel(const TransportUrl& url, const ChannelOptions& options,
                           std::unique_ptr<Channel>* out);

// Listens under the name url.host; InvalidArgument when the name is taken. The listener's port()
// is 0. Destroying it ends the connections not yet accepted (their clients see
// kUnavailable).
Status CreateLocalListener(const TransportUrl& url, std::unique_ptr<Listener>* out);

}  // namespace rgpu

// MoveRequest: an operator's request that a session leave this server (docs/migration.md),
// shared between the thread that serves the operator's connection and the session's thread,
// which acts on it at its client's next waited call. Neither holds the other: the session may
// end, and the operator give up waiting, at any time; the state says who may still act.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "common/status.h"
#include "transport/channel.h"

namespace rgpu::server {

struct MoveRequest {
  enum class Kind {
    kToServer,  // migrate: send the checkpoint to target_url with the target's ticket
    kToStream,  // checkpoint: send it on `stream`, then park until a kRedirect
    kRedirect,  // a parked session's client goes to resume_url
  };
  enum class State {
    kPending,    // not yet seen by the session
    kTaken,      // the session acts on it (and may use `stream`)
    kDecided,    // it moved or stayed (`result`); `stream` is no longer used
    kDone,       // the client left this server (pause_ms known) or never will
    kCancelled,  // the operator gave up before the session took it
  };

  Kind kind = Kind::kToServer;
  std::string target_url;     // kToServer
  std::string ticket;         // kToServer
  std::string lease_token;    // kToServer: the registry's hand-over of the session's lease
  Channel* stream = nullptr;  // kToStream: the operator's connection, while kTaken
  // kToStream without a stream (a session host's, server/session_host.h): takes each piece of
  // the checkpoint in order, `last` on the final one.
  std::function<Status(const char* data, size_t size, bool last)> sink;
  std::string resume_url;  // kRedirect
  uint64_t resume_session = 0;
  std::string resume_credential;

  // The outcome, under mu.
  Status result;
  uint64_t new_session = 0;  // where it went (kToServer)
  uint64_t memory_bytes = 0;
  double transfer_ms = 0;
  double pause_ms = -1;  // from the session stopping to its client leaving (-1: not seen)

  std::mutex mu;
  std::condition_variable cv;
  State state = State::kPending;

  // The session's side. Take: kPending -> kTaken (false when cancelled or already taken).
  bool Take() {
    std::lock_guard<std::mutex> lock(mu);
    if (state != State::kPending) return false;
    state = State::kTaken;
    return true;
  }
  // kTaken -> kDecided with the outcome.
  void Decide(Status s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(s);
      state = State::kDecided;
    }
    cv.notify_all();
  }
  // -> kDone (from kDecided, or from kPending/kTaken when the session ends first: `s` then).
  void Finish(double pause, Status s = Status::Ok()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (state == State::kPending || state == State::kTaken) result = std::move(s);
      pause_ms = pause;
      state = State::kDone;
    }
    cv.notify_all();
  }

  // True once the operator gave up on it before the session took it.
  bool Cancelled() {
    std::lock_guard<std::mutex> lock(mu);
    return state == State::kCancelled;
  }

  // The operator's side. Waits up to `timeout` for the session to take it, then for it to be
  // decided (a taken request is never abandoned: the session may be using `stream`). False when
  // it was not taken in time (it is cancelled then).
  bool AwaitDecision(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, timeout, [&] { return state != State::kPending; })) {
      state = State::kCancelled;
      return false;
    }
    if (state == State::kCancelled) return false;
    cv.wait(lock, [&] { return state == State::kDecided || state == State::kDone; });
    return true;
  }
  // Waits up to `timeout` for kDone.
  void AwaitDone(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, timeout, [&] { return state == State::kDone; });
  }
  // The operator's side whole: AwaitDecision(timeout), then, when the session went and
  // `left_within` is not 0, AwaitDone(left_within) (its client has left: the pause is known).
  // The outcome: the session's, or Timeout when it did not take the request in time.
  Status Await(std::chrono::milliseconds timeout, std::chrono::milliseconds left_within) {
    if (!AwaitDecision(timeout)) {
      return Timeout("the client made no call it waits for within " +
                     std::to_string(timeout.count()) + " ms; the session stays where it was");
    }
    Status s;
    {
      std::lock_guard<std::mutex> lock(mu);
      s = result;
    }
    if (s.ok() && left_within.count() > 0) AwaitDone(left_within);
    return s;
  }
};

}  // namespace rgpu::server

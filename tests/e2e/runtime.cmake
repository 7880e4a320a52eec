# The CUDA runtime acceptance suite (tests/programs/runtime) under `rgpu run` against rgpu-server
# on the software GPU over TCP: every program in both builds (static and shared cudart).
# Included from tests/e2e/CMakeLists.txt, which defines `bin` and `with_server`.
if(NOT RGPU_RUNTIME_PROGRAMS_DIR OR NOT RGPU_RUNTIME_PROGRAMS)
  return()
endif()

foreach(name ${RGPU_RUNTIME_PROGRAMS})
  foreach(variant static shared)
    set(test rt_${variant}_${name})
    add_test(NAME ${test}
             COMMAND ${with_server} ${bin} tcp -- ${bin}/rgpu run --
                     ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_${name}_${variant})
    set_tests_properties(${test} PROPERTIES TIMEOUT 120 LABELS runtime)
    if(name STREQUAL "printf")
      # Device printf must reach the program's stdout. The program checks its own captured output
      # and only then prints its OK line; the marker and the OK line must both be there.
      set_tests_properties(${test} PROPERTIES
                           PASS_REGULAR_EXPRESSION "device says 42.*rt_printf: OK")
    endif()
    if(name STREQUAL "host_register_mapped")
      # A range that is not whole pages is refused on a remote GPU (mapped on a real one); a
      # read-only registration, the client's like any, is offered.
      set_tests_properties(${test} PROPERTIES PASS_REGULAR_EXPRESSION
        "unaligned range refused.*read-only registration used.*rt_host_register_mapped: OK")
    endif()
  endforeach()
endforeach()

# CUDA_MODULE_LOADING keeps its meaning: the driver reports eager loading (cuModuleGetLoadingMode)
# and cudart then loads every module up front; programs still work. Checked both ways for a few
# programs, and the mode itself by a program that reads cudart's view of it.
foreach(name vector_add graph_capture symbols)
  foreach(mode EAGER LAZY)
    set(test rt_static_${name}_${mode})
    add_test(NAME ${test}
             COMMAND ${with_server} ${bin} tcp -- ${CMAKE_COMMAND} -E env CUDA_MODULE_LOADING=${mode}
                     ${bin}/rgpu run -- ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_${name}_static)
    set_tests_properties(${test} PROPERTIES TIMEOUT 120 LABELS runtime)
  endforeach()
endforeach()

# Peer access on a server with two software GPUs: kernels across devices, peer copies.
foreach(variant static shared)
  add_test(NAME rt_${variant}_peer_access_2gpu
           COMMAND ${with_server} ${bin} tcp -- ${bin}/rgpu run --
                   ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_peer_access_${variant})
  set_tests_properties(rt_${variant}_peer_access_2gpu PROPERTIES TIMEOUT 120 LABELS runtime
                       ENVIRONMENT RGPU_SOFTGPU_DEVICES=2
                       PASS_REGULAR_EXPRESSION "rt_peer_access: OK \\(2 devices\\)")
endforeach()

# A program whose threads' waits cannot go to lanes (RGPU_LANES=0) posts its copies out in every
# thread: each thread's cudaStreamSynchronize(0) must bring its own stream's copies (a NULL stream
# in a `_ptsz` entry point is the thread's stream), and a thread freeing its pinned memory must
# not drop a copy another thread is posting.
foreach(variant static shared)
  add_test(NAME rt_${variant}_per_thread_stream_lanes_off
           COMMAND ${with_server} ${bin} tcp -- ${CMAKE_COMMAND} -E env RGPU_LANES=0
                   ${bin}/rgpu run -- ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_per_thread_stream_${variant})
  set_tests_properties(rt_${variant}_per_thread_stream_lanes_off PROPERTIES TIMEOUT 120
                       LABELS runtime)
endforeach()

# Graphs replayed node by node from the client (RGPU_SERVER_GRAPHS=0), as well as kept by the
# server (the default, above): the same programs, the same results.
foreach(name graph_capture graph_conditional)
  add_test(NAME rt_static_${name}_client_graphs
           COMMAND ${with_server} ${bin} tcp -- ${CMAKE_COMMAND} -E env RGPU_SERVER_GRAPHS=0
                   ${bin}/rgpu run -- ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_${name}_static)
  set_tests_properties(rt_static_${name}_client_graphs PROPERTIES TIMEOUT 120 LABELS runtime)
endforeach()

# Managed memory over shared memory as well as TCP (the pages travel by the same calls on another
# transport).
foreach(name managed managed_ranges host_register_mapped)
  add_test(NAME rt_shm_static_${name}
           COMMAND ${with_server} ${bin} shm -- ${bin}/rgpu run --
                   ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_${name}_static)
  set_tests_properties(rt_shm_static_${name} PROPERTIES TIMEOUT 120 LABELS runtime)
  if(name STREQUAL "host_register_mapped")
    set_tests_properties(rt_shm_static_${name} PROPERTIES PASS_REGULAR_EXPRESSION
      "unaligned range refused.*read-only registration used.*rt_host_register_mapped: OK")
  endif()
endforeach()

# A cudart program's first kernels cost at most 3 waited round trips (static and shared cudart).
foreach(variant static shared)
  add_test(NAME rt_${variant}_first_kernel_round_trips
           COMMAND ${with_server} ${bin} tcp -- ${CMAKE_CURRENT_SOURCE_DIR}/first_kernel_round_trips.sh
                   ${bin} ${RGPU_RUNTIME_PROGRAMS_DIR}/rt_vector_add_${variant})
  set_tests_properties(rt_${variant}_first_kernel_round_trips PROPERTIES TIMEOUT 120 LABELS runtime)
endforeach()

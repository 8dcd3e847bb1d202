# Compile options for edgesgd's own targets. Third-party headers (Eigen, GoogleTest) come in as
# system includes, so the strict warnings apply to our code only.

# Options every edgesgd target gets.
function(edgesgd_apply_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wnon-virtual-dtor
    -Wold-style-cast -Wcast-align -Wnull-dereference -Wdouble-promotion -Werror)
endfunction()

# Targets that must run without exceptions, RTTI or thread-safe statics (core, wire, protocol,
# platform backends). -ffp-contract=off keeps float results identical across x86-64 and ARM,
# where GCC would otherwise fuse multiply-adds.
function(edgesgd_embedded_target target)
  edgesgd_apply_warnings(${target})
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fno-exceptions -fno-rtti -fno-threadsafe-statics>
    -ffp-contract=off)
endfunction()

# Host-only targets (tests, the command-line tool): warnings and bit-exact float contraction.
function(edgesgd_host_target target)
  edgesgd_apply_warnings(${target})
  target_compile_options(${target} PRIVATE -ffp-contract=off)
endfunction()

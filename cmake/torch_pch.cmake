# One precompiled header for the torch headers, built once and reused by every target that
# includes torch (REUSE_FROM needs the same compile flags, so those targets link torch_deps).
add_library(distml_torch_deps INTERFACE)
target_link_libraries(distml_torch_deps INTERFACE ${TORCH_LIBRARIES})
# LibTorch's exported flags add -D_GLIBCXX_USE_CXX11_ABI=1 and warnings-as-usual; keep ours.
add_library(distml_torch_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cc)
target_link_libraries(distml_torch_pch PUBLIC distml_torch_deps)
target_precompile_headers(distml_torch_pch PRIVATE ${CMAKE_CURRENT_LIST_DIR}/torch_pch.h)

# Gives `target` the shared torch precompiled header, and compiles its sources in batches of
# seventeen (a unity build). Even with the header precompiled, a translation unit that includes
# torch costs ~6 s of CPU before its first own line (loading the 600 MB header), and its files
# instantiate mostly the same torch templates: batches pay that once per batch. Eight took a
# clean build on 2 cores from 18.6 to 8.3 minutes; sixteen took the trainer library from 305 to
# 207 job-seconds (7 units to 4) and the RL library from 215 to 102 (4 to 2); seventeen keeps
# the trainer library's 50 files in 3 units.
# Files of one target therefore must not define the same name in their anonymous namespaces.
function(distml_use_torch_pch target)
  target_link_libraries(${target} PRIVATE distml_torch_deps)
  target_precompile_headers(${target} REUSE_FROM distml_torch_pch)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 17)
endfunction()

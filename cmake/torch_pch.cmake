# One precompiled header for the torch headers, built once and reused by every target that
# includes torch (REUSE_FROM needs the same compile flags, so those targets link torch_deps).
add_library(distml_torch_deps INTERFACE)
target_link_libraries(distml_torch_deps INTERFACE ${TORCH_LIBRARIES})
# LibTorch's exported flags add -D_GLIBCXX_USE_CXX11_ABI=1 and warnings-as-usual; keep ours.
add_library(distml_torch_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/torch_pch.cc)
target_link_libraries(distml_torch_pch PUBLIC distml_torch_deps)
target_precompile_headers(distml_torch_pch PRIVATE ${CMAKE_CURRENT_LIST_DIR}/torch_pch.h)

# Gives `target` the shared torch precompiled header.
function(distml_use_torch_pch target)
  target_link_libraries(${target} PRIVATE distml_torch_deps)
  target_precompile_headers(${target} REUSE_FROM distml_torch_pch)
endfunction()

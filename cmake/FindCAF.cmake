# Debian's libcaf-dev 0.17 ships neither a CMake package nor a pkg-config file.
# Defines CAF::core, CAF::io and CAF::openssl (the target names CAF >= 0.18 uses).
if(NOT CAF_FIND_COMPONENTS)
  set(CAF_FIND_COMPONENTS core)
endif()

find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp)
mark_as_advanced(CAF_INCLUDE_DIR)
if(CAF_INCLUDE_DIR)
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+" _caf_version "${_caf_version_line}")
  math(EXPR _caf_major "${_caf_version} / 10000")
  math(EXPR _caf_minor "(${_caf_version} / 100) % 100")
  math(EXPR _caf_patch "${_caf_version} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

set(CAF_LIBRARIES "")
set(CAF_INCLUDE_DIRS "${CAF_INCLUDE_DIR}")
foreach(_component IN LISTS CAF_FIND_COMPONENTS)
  find_library(CAF_${_component}_LIBRARY NAMES caf_${_component})
  mark_as_advanced(CAF_${_component}_LIBRARY)
  if(CAF_${_component}_LIBRARY AND CAF_INCLUDE_DIR)
    set(CAF_${_component}_FOUND TRUE)
    list(APPEND CAF_LIBRARIES "${CAF_${_component}_LIBRARY}")
  else()
    set(CAF_${_component}_FOUND FALSE)
  endif()
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR CAF_LIBRARIES
  VERSION_VAR CAF_VERSION
  HANDLE_COMPONENTS)

if(CAF_FOUND)
  find_package(Threads REQUIRED)
  foreach(_component IN LISTS CAF_FIND_COMPONENTS)
    if(CAF_${_component}_FOUND AND NOT TARGET CAF::${_component})
      add_library(CAF::${_component} SHARED IMPORTED)
      set_target_properties(CAF::${_component} PROPERTIES
        IMPORTED_LOCATION "${CAF_${_component}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}")
    endif()
  endforeach()
  if(TARGET CAF::core)
    set_property(TARGET CAF::core APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
  if(TARGET CAF::io)
    set_property(TARGET CAF::io APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(TARGET CAF::openssl)
    find_package(OpenSSL REQUIRED)
    set_property(TARGET CAF::openssl APPEND PROPERTY INTERFACE_LINK_LIBRARIES CAF::io OpenSSL::SSL)
  endif()
endif()

# Writes OUTPUT, a C++ file holding the files the node serves as they are:
# the console (actors/console/*, under /ui/) and the OpenAPI document
# (messages/openapi.json, at /v1/openapi.json).
# Run as: cmake -DOUTPUT=... -DCONSOLE="a.html|b.js" -DOPENAPI=openapi.json -P embed_web_assets.cmake
string(REPLACE "|" ";" CONSOLE "${CONSOLE}")
list(SORT CONSOLE)

function(content_type_of file out)
  get_filename_component(ext "${file}" LAST_EXT)
  if(ext STREQUAL ".html")
    set(type "text/html; charset=utf-8")
  elseif(ext STREQUAL ".js")
    set(type "text/javascript; charset=utf-8")
  elseif(ext STREQUAL ".css")
    set(type "text/css; charset=utf-8")
  elseif(ext STREQUAL ".json")
    set(type "application/json")
  elseif(ext STREQUAL ".svg")
    set(type "image/svg+xml")
  else()
    message(FATAL_ERROR "no content type known for ${file}")
  endif()
  set(${out} "${type}" PARENT_SCOPE)
endfunction()

set(assets "")
function(add_asset url file)
  file(READ "${file}" body)
  if(body MATCHES "\\)taskmill_asset\"")
    message(FATAL_ERROR "${file} holds the raw string delimiter")
  endif()
  content_type_of("${file}" type)
  string(APPEND assets "    {\"${url}\", \"${type}\", R\"taskmill_asset(${body})taskmill_asset\"},\n")
  set(assets "${assets}" PARENT_SCOPE)
endfunction()

foreach(file IN LISTS CONSOLE)
  get_filename_component(base "${file}" NAME)
  add_asset("/ui/${base}" "${file}")
endforeach()
add_asset("/v1/openapi.json" "${OPENAPI}")

set(content "// Generated from actors/console and messages/openapi.json by cmake/embed_web_assets.cmake.
#include \"actors/http/web_assets.hpp\"

namespace taskmill {

namespace {

const web_asset assets[] = {
${assets}};

}  // namespace

const web_asset* find_web_asset(std::string_view path) {
  if (path == \"/ui/\") path = \"/ui/index.html\";
  for (const auto& asset : assets)
    if (asset.path == path) return &asset;
  return nullptr;
}

}  // namespace taskmill
")
file(WRITE "${OUTPUT}.tmp" "${content}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")

# Writes OUTPUT, a C++ file holding every storage/migrations/NNN_name.sql.
# Run as: cmake -DOUTPUT=... -DSOURCES="a.sql;b.sql" -P embed_migrations.cmake
string(REPLACE "|" ";" SOURCES "${SOURCES}")
list(SORT SOURCES)
set(body "")
foreach(file IN LISTS SOURCES)
  get_filename_component(base "${file}" NAME)
  if(NOT base MATCHES "^([0-9]+)_([a-z0-9_]+)\\.sql$")
    message(FATAL_ERROR "migration file name must be NNN_name.sql: ${base}")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  file(READ "${file}" sql)
  string(APPEND body "    {${version}, \"${name}\", R\"taskmill_sql(${sql})taskmill_sql\"},\n")
endforeach()
set(content "// Generated from storage/migrations by cmake/embed_migrations.cmake.
#include \"storage/migrations.hpp\"

namespace taskmill::db {

const std::vector<migration>& all_migrations() {
  static const std::vector<migration> list{
${body}  };
  return list;
}

}  // namespace taskmill::db
")
file(WRITE "${OUTPUT}.tmp" "${content}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")

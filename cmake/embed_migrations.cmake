# Writes OUTPUT, a C++ file holding the SQL of storage/: every versioned
# migration (storage/migrations/NNN_name.sql) and every definitions file
# (storage/sql/name.sql).
# Run as: cmake -DOUTPUT=... -DMIGRATIONS="a.sql|b.sql" -DDEFINITIONS="c.sql|d.sql" -P embed_migrations.cmake
string(REPLACE "|" ";" MIGRATIONS "${MIGRATIONS}")
string(REPLACE "|" ";" DEFINITIONS "${DEFINITIONS}")
list(SORT MIGRATIONS)
list(SORT DEFINITIONS)
set(migrations "")
foreach(file IN LISTS MIGRATIONS)
  get_filename_component(base "${file}" NAME)
  if(NOT base MATCHES "^([0-9]+)_([a-z0-9_]+)\\.sql$")
    message(FATAL_ERROR "migration file name must be NNN_name.sql: ${base}")
  endif()
  math(EXPR version "${CMAKE_MATCH_1}")
  set(name "${CMAKE_MATCH_2}")
  file(READ "${file}" sql)
  string(APPEND migrations "    {${version}, \"${name}\", R\"taskmill_sql(${sql})taskmill_sql\"},\n")
endforeach()
set(definitions "")
foreach(file IN LISTS DEFINITIONS)
  get_filename_component(base "${file}" NAME)
  if(NOT base MATCHES "^([a-z0-9_]+)\\.sql$")
    message(FATAL_ERROR "definitions file name must be name.sql: ${base}")
  endif()
  file(READ "${file}" sql)
  string(APPEND definitions "    {\"${CMAKE_MATCH_1}\", R\"taskmill_sql(${sql})taskmill_sql\"},\n")
endforeach()
set(content "// Generated from storage/migrations and storage/sql by cmake/embed_migrations.cmake.
#include \"storage/migrations.hpp\"

namespace taskmill::db {

const std::vector<migration>& all_migrations() {
  static const std::vector<migration> list{
${migrations}  };
  return list;
}

const std::vector<definitions>& all_definitions() {
  static const std::vector<definitions> list{
${definitions}  };
  return list;
}

}  // namespace taskmill::db
")
file(WRITE "${OUTPUT}.tmp" "${content}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")

#pragma once

// The API's key space endpoints (SPEC §4 Keyed limits), for the route table
// in actors/api.cpp.

#include "actors/http/api_call.hpp"

namespace taskmill::api_call {

/// GET /v1/key-spaces: every space with its types and running tasks.
void list_key_spaces(self_ptr self, call_ptr c);
/// GET /v1/key-spaces/{name}?top=N: a space with its N keys running most
/// and N with most due tasks (10 by default).
void get_key_space(self_ptr self, call_ptr c);
/// PUT /v1/key-spaces/{name}: 201 when created, 200 when changed.
void put_key_space(self_ptr self, call_ptr c);
/// DELETE /v1/key-spaces/{name}: 409 while a type is keyed in it.
void delete_key_space(self_ptr self, call_ptr c);
/// GET /v1/key-spaces/{name}/keys/{key}?tasks=N: a key with N of its running
/// and N of its waiting tasks (20 by default); .../keys/ is the key "".
void get_key(self_ptr self, call_ptr c);

}  // namespace taskmill::api_call

#pragma once
// Each node its own PostgreSQL role (issue 24, item 5). Migration 13 turns
// on row-level security with policies keyed on the connecting role's name:
// a role named as a node reads and writes that node's row, the sandboxes
// placed on it and their sessions, operations, events, logs and network
// settings, reads only the credentials sealed for its live sandboxes,
// and writes no meta but its own token hash. The API replicas connect as the
// tables' owner, which the policies do not bind. SQLite (one machine) has
// no roles and stays as it is.
#include <string>

#include "base/result.h"

namespace vessel::store {

// Creates the LOGIN role `node` with `password` on the PostgreSQL database
// at `url` (connected as a role that may create roles and owns the tables,
// or a superuser), and grants it what a node uses; the policies do the
// rest. The database must be migrated (13 or later). kAlreadyExists when
// the role exists.
Status createNodeRole(const std::string& url, const std::string& node, const std::string& password);

}  // namespace vessel::store

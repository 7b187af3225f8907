#pragma once
// The one SQL store: every Store call written once (sql_store.cc) over a
// driver (sql_driver.h). openSqlite and openPostgres (store.h) are it over
// their engine's driver.
#include <memory>

#include "base/clock.h"
#include "base/result.h"
#include "store/sql_driver.h"
#include "store/store.h"

namespace vessel::store {

// Migrates the database behind `driver` to the newest schema and returns
// the store over it. `clock` must outlive the store.
Result<std::unique_ptr<Store>> openSqlStore(std::unique_ptr<SqlDriver> driver,
                                            const WallClock& clock);

}  // namespace vessel::store

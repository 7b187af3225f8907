#pragma once
// Built with AddressSanitizer (PRESET=asan), freed memory sits in ASan's
// quarantine and every allocation carries redzones, so the RSS budgets the
// release build is held to do not apply. The logical bounds (flow-control
// windows, file descriptors, buffered bytes) are checked either way.
namespace vessel::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRssBudgetsApply = false;
#else
inline constexpr bool kRssBudgetsApply = true;
#endif

}  // namespace vessel::testing

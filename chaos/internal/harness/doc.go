// Package harness holds what the redfence-chaos binary needs of the chaos
// module beyond package chaos's public API: the soak (Soak, SoakOptions,
// SoakResult) and the tables of scenario and soak results.
//
// Package chaos imports harness (its soak fills a SoakResult, its
// artifacts print these tables), so harness cannot import chaos. It reaches
// chaos two ways: the result tables take any type with chaos.Result's
// fields (ResultFields), which chaos.Result is, checked at compile time;
// and Soak is a variable that package chaos sets to its soak when it is
// initialised, since the soak shares Run's unexported machinery.
package harness

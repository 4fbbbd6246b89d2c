package engine

// OpenTest is openTest, for the tests of package engine_test.
var OpenTest = openTest

// CacheMax is cacheMax, for the tests of package engine_test.
const CacheMax = cacheMax

//! Rule sets for tests and benchmarks: ClassBench-style sets, the XR-5 list, and traces.

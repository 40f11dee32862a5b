"""Writing results in other tools' formats: WildToolBench's published result files (:mod:`.wtb_result`) and gold
trajectories as training conversations (:mod:`.training`). A package because each format is its own writer over the
same suites and results."""

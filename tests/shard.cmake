# Scale-out: shard selection, shard partials (src/store/partial.c), the exact
# merge (src/eval/merge.c) and `kl --shard` / `kldeval merge` end to end.
kld_add_test(NAME test_shard SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_shard.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_shard kldeval)
# The one-machine recipe (deploy/parallel/kl-parallel.sh).
add_test(NAME test_deploy_parallel COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_deploy_parallel.sh
         $<TARGET_FILE:kldeval> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_deploy_parallel PROPERTIES ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLDEVAL_DB=${CMAKE_BINARY_DIR}/test-runs.sqlite"
                     TIMEOUT 300)
# The Slurm recipe on a real one-node cluster (daemons started by the test, as
# root). Labels "slow;slurm": never in the default run (`-LE slow`), which must
# work on a fresh machine; .ci/run installs Slurm (tests/slurm/setup.sh) and
# runs `-L slurm`, and its slow run is `-L slow -LE slurm`.
add_test(NAME test_slurm COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/test_slurm.sh
         $<TARGET_FILE:kldeval> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_slurm PROPERTIES LABELS "slow;slurm" TIMEOUT 600
                     ENVIRONMENT "KLD_BUILD_DIR=${CMAKE_BINARY_DIR}" RUN_SERIAL ON)
# Sharded dumps (`dump --shard`, `merge --dump`, src/store/dump_merge.c).
kld_add_test(NAME test_dump_shard SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_dump_shard.c
             ARGS $<TARGET_FILE:kldeval> TIMEOUT 300)
add_dependencies(test_dump_shard kldeval)
# The Kubernetes recipe's manifests and pod commands, without a cluster.
add_test(NAME test_deploy_k8s COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/test_deploy_k8s.py
         $<TARGET_FILE:kldeval> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_deploy_k8s PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "KLD_BUILD_DIR=${CMAKE_BINARY_DIR};KLDEVAL_DB=${CMAKE_BINARY_DIR}/test-runs.sqlite")

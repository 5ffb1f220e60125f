#!/bin/sh
# Service temporal-namespace (temporalio/admin-tools), once the server's port answers: waits
# until the cluster reports healthy, creates the namespace the workers poll unless it exists,
# and ends when the frontend resolves it (its namespace cache refreshes every 2 s), so a worker
# started after this never meets "namespace not found".
set -eu
address="${TEMPORAL_ADDRESS:-temporal:7233}"
namespace="${TEMPORAL_NAMESPACE:-default}"
retention="${TEMPORAL_RETENTION:-720h}"

wait_for() {  # wait_for WHAT COMMAND...: up to 60 tries, 2 s apart
    what="$1"
    shift
    tries=0
    until "$@" >/dev/null 2>&1; do
        tries=$((tries + 1))
        if [ "$tries" -ge 60 ]; then
            echo "temporal-namespace: $what at $address: still not after $tries tries" >&2
            exit 1
        fi
        sleep 2
    done
}

wait_for "cluster healthy" temporal operator cluster health --address "$address"
if temporal operator namespace describe --namespace "$namespace" --address "$address" \
    >/dev/null 2>&1; then
    echo "temporal-namespace: $namespace exists"
else
    temporal operator namespace create --namespace "$namespace" --retention "$retention" \
        --address "$address"
fi
wait_for "namespace $namespace resolved" \
    temporal workflow count --namespace "$namespace" --address "$address"
echo "temporal-namespace: $namespace ready"

#!/bin/bash
# Two "machines" on one host: network namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2),
# one MPI rank in each, talking over TCP only (btl self,tcp), launched by mpirun through an rsh
# agent that enters the other namespace. Runs the collective checks and the equivalence test.
# Exits 77 (ctest: skipped) where the machine does not allow `ip netns` (no root, no CAP_NET_ADMIN).
# Usage: netns_test.sh <mpirun> <ember_dist_mpi_test>
set -euo pipefail
mpirun=$1 prog=$2
a=ember_a_$$ b=ember_b_$$ dir=$(mktemp -d)
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
if ! ip netns add "$a" 2>/dev/null; then echo "SKIPPED: ip netns is not allowed here (loopback-only tests ran)"; exit 77; fi
ip netns add "$b"
ip link add "va$$" type veth peer name "vb$$"
ip link set "va$$" netns "$a"
ip link set "vb$$" netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev "va$$"
ip -n "$b" addr add 10.77.0.2/24 dev "vb$$"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "va$$" up
ip -n "$b" link set "vb$$" up

cat > "$dir/agent.sh" <<AGENT
#!/bin/bash
# mpirun's rsh agent: "host" 10.77.0.N is namespace $a or $b.
host=\$1; shift
case \$host in 10.77.0.1) ns=$a;; 10.77.0.2) ns=$b;; *) echo "agent: unknown host \$host" >&2; exit 1;; esac
exec ip netns exec \$ns /bin/sh -c "\$*"
AGENT
chmod +x "$dir/agent.sh"
printf "10.77.0.1 slots=1\n10.77.0.2 slots=1\n" > "$dir/hosts"

run() {
  ip netns exec "$a" "$mpirun" --allow-run-as-root --hostfile "$dir/hosts" -np 2 \
    --mca plm_rsh_agent "$dir/agent.sh" --mca oob_tcp_if_include 10.77.0.0/24 \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca btl self,tcp -x OMP_NUM_THREADS=1 "$@"
}
echo "== where the ranks run"
run /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK in namespace $(ip netns identify $$)"'
echo "== collectives over veth (TCP)"
out=$(run "$prog" collectives); echo "$out"
[ "$(grep -c '^PASS collectives' <<<"$out")" -eq 2 ] || { echo "FAIL: collectives"; exit 1; }
echo "== equivalence over veth (TCP)"
out=$(run "$prog" equivalence); echo "$out"
if grep -q '^FAIL' <<<"$out" || [ "$(grep -c '^PASS equivalence' <<<"$out")" -ne 8 ]; then echo "FAIL: equivalence"; exit 1; fi
echo "PASS: two network namespaces"

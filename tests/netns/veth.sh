# Sourced by the scripts that run engramds on "machines" made of network
# namespaces (tests/netns/run.sh, bench/remote.sh), which set $build.
#
# veth_link NS_A NS_B IF_A IF_B ADDR_A ADDR_B: a veth pair between two
# existing namespaces, addresses ADDR/24 on each end, both ends up.
veth_link() {
  ip link add "$3" type veth peer name "$4"
  ip link set "$3" netns "$1"
  ip link set "$4" netns "$2"
  ip -n "$1" addr add "$5/24" dev "$3"
  ip -n "$2" addr add "$6/24" dev "$4"
  ip -n "$1" link set "$3" up
  ip -n "$2" link set "$4" up
  ip -n "$1" link set lo up
  ip -n "$2" link set lo up
}

# netns_engramd NS SOCKET LOG ARGS...: starts $build/programs/engramd/engramd ARGS in
# namespace NS, its output appended to LOG, and waits until SOCKET answers
# engramctl status (10 s); its pid in $engramd_pid. Returns 1 if it did
# not come up.
netns_engramd() {
  local ns=$1 socket=$2 log=$3
  shift 3
  ip netns exec "$ns" "$build/programs/engramd/engramd" "$@" >>"$log" 2>&1 &
  engramd_pid=$!
  for _ in $(seq 1 200); do
    "$build/programs/engramctl/engramctl" --socket "$socket" status >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  return 1
}

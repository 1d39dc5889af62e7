# Plots bench/remote.sh's results: upstream bytes/s and each engramd's CPU
# per GB against item size, with the plain TCP stream on the same veth pair.
# gnuplot -e "data='plot.dat'; out='remote.png'" bench/remote.gp
# data columns: item bytes, GB/s plain, GB/s TLS (16 steps a chunk), GB/s
# TCP, then CPU s/GB: send plain, recv plain, send TLS, recv TLS (16
# steps a chunk), TCP sender, TCP receiver; then GB/s plain and TLS of
# one-step chunks (the writer's default); then GB/s of one mutual-TLS
# stream (tls_stream.c), the TLS link's own limit.
set terminal png size 1400,560 font ",11"
set output out
set multiplot layout 1,2 title "upstream table across a veth pair vs one plain TCP stream and one TLS stream (medians)"
set logscale x
set grid
set xlabel "item size (bytes)"
set xtics ("400" 400, "4K" 4096, "28K" 28672, "400K" 409600)
set ylabel "GB / s"
set yrange [0:*]
set key top left font ",9"
plot data u 1:4 w l lw 2 dt 2 lc rgb "black" title "TCP, one stream", \
     data u 1:13 w l lw 2 dt 4 lc rgb "dark-red" title "TLS, one stream (its own limit)", \
     data u 1:($4*0.5) w l lw 1 dt 3 lc rgb "gray" title "half of TCP (the bar from 28K)", \
     data u 1:2 w lp lw 2 pt 7 title "engram, plaintext, 16 steps a chunk", \
     data u 1:3 w lp lw 2 pt 5 title "engram, mutual TLS, 16 steps a chunk", \
     data u 1:11 w lp lw 1 pt 6 title "engram, plaintext, 1 step a chunk", \
     data u 1:12 w lp lw 1 pt 4 title "engram, mutual TLS, 1 step a chunk"
set ylabel "CPU seconds per GB (16 steps a chunk)"
set logscale y
set yrange [*:*]
set key top right font ",9"
plot data u 1:5 w lp lw 2 pt 7 title "engramd sending, plaintext", \
     data u 1:6 w lp lw 2 pt 6 title "engramd receiving, plaintext", \
     data u 1:7 w lp lw 2 pt 5 title "engramd sending, TLS", \
     data u 1:8 w lp lw 2 pt 4 title "engramd receiving, TLS", \
     data u 1:9 w l lw 2 dt 2 lc rgb "black" title "TCP sender", \
     data u 1:10 w l lw 2 dt 3 lc rgb "gray50" title "TCP receiver"
unset multiplot

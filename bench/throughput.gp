# Plots bench/throughput.sh's results: items/s and MB/s against payload size.
# gnuplot -e "data='plot.dat'; out='throughput.png'" bench/throughput.gp
set terminal png size 1400,560 font ",11"
set output out
set multiplot layout 1,2 title "engram vs Redis (pipelined) vs memcpy, one process each"
set logscale xy
set grid
set key outside bottom center horizontal maxrows 2 font ",9"
set xlabel "payload per item (bytes)"
set xtics ("400" 400, "4K" 4000, "40K" 40000, "400K" 400000)
set ylabel "items / s"
plot data u 1:2 w lp lw 2 pt 7 title "engram insert", \
     data u 1:3 w lp lw 2 pt 5 title "redis SET", \
     data u 1:4 w lp lw 1 pt 1 dt 2 title "memcpy copy-in", \
     data u 1:5 w lp lw 2 pt 9 title "engram sample (copy)", \
     data u 1:6 w lp lw 2 pt 11 title "redis GET", \
     data u 1:7 w lp lw 1 pt 2 dt 2 title "memcpy gather", \
     data u 1:8 w lp lw 2 pt 13 title "engram zero-copy sample"
set ylabel "MB / s"
set key inside bottom right vertical font ",9"
plot data u 1:($2*$1/1e6) w lp lw 2 pt 7 title "engram insert", \
     data u 1:($3*$1/1e6) w lp lw 2 pt 5 title "redis SET", \
     data u 1:($4*$1/1e6) w lp lw 1 pt 1 dt 2 title "memcpy copy-in", \
     data u 1:($5*$1/1e6) w lp lw 2 pt 9 title "engram sample (copy)", \
     data u 1:($6*$1/1e6) w lp lw 2 pt 11 title "redis GET", \
     data u 1:($7*$1/1e6) w lp lw 1 pt 2 dt 2 title "memcpy gather"
unset multiplot

# Engram.jl against a real server, embedded in the test process. Not run on
# engram's CI machines (no Julia there): bindings/julia/check parses this
# file and the package, and compares every ccall and struct with engram.h.
using Engram
using Test

const SOCKET = joinpath(mktempdir(), "engram.sock")
const server = Engram.Server(SOCKET)

@testset "Engram.jl" begin
    client = Engram.connect(SOCKET)
    cols = [Column("obs", Float32, (4,)), Column("step", Int64, ())]

    @testset "round trip, copied and zero-copy" begin
        create_table(client, "t", cols; max_size = 100, sampler = :fifo, max_times_sampled = 1)
        table = open_table(client, "t")
        w = writer(client, cols)
        for i in 0:9
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, 1.0)
        end
        flush!(w)
        data, infos = sample(table, 4)
        @test size(data[1]) == (4, 1, 4)
        @test vec(data[2]) == [0, 1, 2, 3]
        @test all(data[1][:, 1, 3] .== 2f0)
        @test all(x -> x.times_sampled == 1, infos)
        batch = sample_view(table, 2)
        @test length(batch) == 2
        v = view_column(batch, 1, 1)
        @test size(v) == (4, 1)
        @test v[1] == 4f0
        close(w)
        close(table)
    end

    @testset "an array kept past close(batch) shows its own item" begin
        create_table(client, "kept", cols; max_size = 4)
        table = open_table(client, "kept")
        w = writer(client, cols)
        for i in 0:3
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, 1.0)
        end
        flush!(w)
        batch = sample_view(table, 1)
        v = view_column(batch, 1, 1)
        mine = v[1]
        close(batch)
        @test_throws EngramError view_column(batch, 1, 1)
        for i in 100:5099  # every item evicted, every block of its class written again
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, 1.0)
        end
        flush!(w)
        @test all(v .== mine)
        close(w)
        close(table)
    end

    @testset "errors carry the code and the message" begin
        err = try open_table(client, "missing"); nothing catch e; e end
        @test err isa EngramError && err.code == Engram.ENGRAM_E_NOT_FOUND
        @test occursin("missing", err.message)
        @test_throws EngramError create_table(client, "t", cols; max_size = 10)
        table = open_table(client, "t")
        @test_throws EngramError sample(table, 1; timeout_ms = 0)
        w = writer(client, cols)
        @test_throws ArgumentError append!(w, zeros(Float32, 3), Int64(0))
        close(table)
        @test_throws EngramError sample(table, 1)
    end

    @testset "batches without repeats" begin
        create_table(client, "d", cols; max_size = 10)
        table = open_table(client, "d")
        w = writer(client, cols)
        for i in 0:4
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, 1.0)
        end
        flush!(w)
        for _ in 1:20
            data, _ = sample(table, 5; no_repeats = true)
            @test sort(vec(data[2])) == collect(0:4)
        end
        err = try sample(table, 6; no_repeats = true); nothing catch e; e end
        @test err isa EngramError && err.code == Engram.ENGRAM_E_RANGE
        close(w)
        close(table)
    end

    @testset "items listed oldest or highest first" begin
        create_table(client, "l", cols; max_size = 10, sampler = :prioritized)
        table = open_table(client, "l")
        w = writer(client, cols)
        for (i, p) in enumerate([2.0, 7.0, 1.0])
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, p)
        end
        flush!(w)
        @test [x.priority for x in items(client, "l")] == [2.0, 7.0, 1.0]
        @test [x.priority for x in items(client, "l"; by = :priority)] == [7.0, 2.0, 1.0]
        @test_throws ArgumentError items(client, "l"; by = :age)
        close(w)
        close(table)
    end

    @testset "priorities and deletes by key" begin
        create_table(client, "p", cols; max_size = 10, sampler = :prioritized)
        table = open_table(client, "p")
        w = writer(client, cols; keep_keys = true)
        for i in 0:2
            append!(w, fill(Float32(i), 4), Int64(i))
            create_item!(w, table, 1, 1.0)
        end
        flush!(w)
        keys = take_keys!(w)
        @test length(keys) == 3
        @test update_priorities!(table, keys, [0.0, 0.0, 1.0]) == [0, 0, 0]
        @test delete_items!(table, [keys[1], UInt64(12345)]) == [0, Engram.ENGRAM_E_UNKNOWN_KEY]
        data, _ = sample(table, 8)
        @test all(vec(data[2]) .== 2)
        update_priorities_async!(table, [keys[2], keys[3], UInt64(12345)], [3.0, 0.0, 1.0])
        data, _ = sample(table, 8)
        @test all(vec(data[2]) .== 1)
        @test_throws EngramError update_priorities_async!(table, [keys[2]], [-1.0])
        @test update_priorities!(table, UInt64[], Float64[]) == Int32[]
        # Begun now, collected later: drawn after the update sent before it.
        update_priorities_async!(table, [keys[2], keys[3]], [0.0, 1.0])
        sample_begin(table, 8)
        @test_throws EngramError sample_begin(table, 8)
        update_priorities_async!(table, [keys[2], keys[3]], [1.0, 0.0])
        data, infos = sample_end(table)
        @test length(infos) == 8 && all(vec(data[2]) .== 2)
        @test_throws ArgumentError sample_end(table)
        @test table_info(client, "p").size == 2
    end

    @testset "finalizers queue closes; the next call does them" begin
        table = open_table(client, "p")
        table = nothing
        GC.gc()
        @test table_info(client, "p").clients >= 0
    end

    @testset "interrupt ends a blocked sample" begin
        create_table(client, "q", cols; max_size = 10, sampler = :fifo, max_times_sampled = 1,
                     rate_limiter = Engram.queue(10))
        table = open_table(client, "q")
        t = Threads.@spawn (sleep(0.2); interrupt(client))
        err = try sample(table, 1); nothing catch e; e end
        wait(t)
        @test err isa EngramError && err.code == Engram.ENGRAM_E_INTERRUPTED
    end

    close(client)
end

close(server)

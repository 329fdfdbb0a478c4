-- The live source's OLTP schema (python_hooks/live/): what `live pg-up` creates, safe to run again.
-- Chosen so that the capture meets each type Debezium encodes its own way (docs/DEBEZIUM_REAL_OUTPUT.md).

create schema if not exists shop;

-- REPLICA IDENTITY DEFAULT (the primary key): an update logs no before-image, a delete only the key.
-- Flattened topic, two Kafka partitions. loyalty_points is widened to bigint by the workload, and a
-- `phone` column is added.
create table if not exists shop.customer (
    customer_id integer primary key,
    full_name text not null,
    email text,
    is_active boolean not null default true,
    birth_date date,
    balance numeric(12, 2) not null default 0,
    signed_up_at timestamptz not null default now(),
    preferences jsonb,
    external_ref uuid not null default gen_random_uuid(),
    tags text[],
    loyalty_points integer not null default 0
);

-- A composite key and REPLICA IDENTITY FULL (every column in the before-image of an update or delete);
-- full envelope. Truncated by the workload; a `gift_wrap` column is added. `note` is TOASTed when long.
create table if not exists shop.order_line (
    order_id bigint not null,
    line_no smallint not null,
    product_code text not null,
    quantity integer not null,
    unit_price numeric(10, 3) not null,
    discount numeric(5, 4),
    ordered_at timestamp not null,
    shipped_on date,
    packing_slip bytea,
    note text,
    primary key (order_id, line_no)
);
alter table shop.order_line replica identity full;
alter table shop.order_line alter column note set storage external;

-- A large text column kept out of line uncompressed (STORAGE EXTERNAL): every body above about 2 kB is
-- TOASTed, and an update that leaves it alone does not log it. REPLICA IDENTITY DEFAULT; flattened.
create table if not exists shop.document (
    document_id bigint primary key,
    title text not null,
    revision integer not null,
    body text not null,
    checksum bytea,
    updated_at timestamptz not null
);
alter table shop.document alter column body set storage external;

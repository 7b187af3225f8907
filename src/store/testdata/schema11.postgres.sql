-- A PostgreSQL store at schema 11, made by the store as it was before the
-- SQL store (main at a089400, postgres_store.cc): openPostgres on a fresh
-- database and one row of every kind written through the Store interface,
-- then `pg_dump --inserts --no-owner --no-privileges` (15.18; its psql-only
-- \restrict lines removed). store_upgrade_test.cc loads it and checks every
-- row reads back.
--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: api_keys; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.api_keys (
    key_sha256 text NOT NULL,
    tenant_id text NOT NULL,
    created_ms bigint NOT NULL
);


--
-- Name: credentials; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.credentials (
    tenant_id text NOT NULL,
    name text NOT NULL,
    hosts text NOT NULL,
    header text NOT NULL,
    value text NOT NULL,
    created_ms bigint NOT NULL
);


--
-- Name: events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events (
    seq bigint NOT NULL,
    tenant_id text NOT NULL,
    operation_id text NOT NULL,
    sandbox_id text NOT NULL,
    type text NOT NULL,
    data text NOT NULL,
    at_ms bigint NOT NULL
);


--
-- Name: events_seq_seq; Type: SEQUENCE; Schema: public; Owner: -
--

ALTER TABLE public.events ALTER COLUMN seq ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.events_seq_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);


--
-- Name: meta; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.meta (
    key text NOT NULL,
    value text NOT NULL
);


--
-- Name: nodes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.nodes (
    name text NOT NULL,
    advertise_url text NOT NULL,
    data_url text NOT NULL,
    memory_mib bigint NOT NULL,
    memory_free_mib bigint NOT NULL,
    vcpus bigint NOT NULL,
    sandboxes bigint NOT NULL,
    templates text NOT NULL,
    accel text NOT NULL,
    state text NOT NULL,
    registered_ms bigint NOT NULL,
    heartbeat_ms bigint NOT NULL,
    envd_url text DEFAULT ''::text NOT NULL
);


--
-- Name: operations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.operations (
    id text NOT NULL,
    tenant_id text NOT NULL,
    sandbox_id text NOT NULL,
    kind text NOT NULL,
    state text NOT NULL,
    error_code text DEFAULT ''::text NOT NULL,
    error_message text DEFAULT ''::text NOT NULL,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    owner text DEFAULT ''::text NOT NULL
);


--
-- Name: replicas; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.replicas (
    id text NOT NULL,
    heartbeat_ms bigint NOT NULL
);


--
-- Name: sandbox_ingress; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sandbox_ingress (
    sandbox_id text NOT NULL,
    settings text NOT NULL
);


--
-- Name: sandbox_network; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sandbox_network (
    sandbox_id text NOT NULL,
    settings text NOT NULL
);


--
-- Name: sandboxes; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sandboxes (
    id text NOT NULL,
    tenant_id text NOT NULL,
    template text NOT NULL,
    state text NOT NULL,
    error text DEFAULT ''::text NOT NULL,
    vcpus bigint NOT NULL,
    memory_mib bigint NOT NULL,
    metadata text NOT NULL,
    created_ms bigint NOT NULL,
    updated_ms bigint NOT NULL,
    idle_timeout_s bigint DEFAULT 0 NOT NULL,
    expires_ms bigint DEFAULT 0 NOT NULL,
    last_active_ms bigint DEFAULT 0 NOT NULL,
    disk_mib bigint DEFAULT 0 NOT NULL,
    node text DEFAULT ''::text NOT NULL,
    on_timeout text DEFAULT 'delete'::text NOT NULL,
    pause_memory bigint DEFAULT 1 NOT NULL,
    auto_resume bigint DEFAULT 0 NOT NULL,
    lifetime_s bigint DEFAULT 0 NOT NULL
);


--
-- Name: schema_migrations; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.schema_migrations (
    number bigint NOT NULL,
    applied_ms bigint NOT NULL
);


--
-- Name: sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sessions (
    token_sha256 text NOT NULL,
    tenant_id text NOT NULL,
    sandbox_id text NOT NULL,
    created_ms bigint NOT NULL,
    expires_ms bigint NOT NULL
);


--
-- Name: templates; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.templates (
    name text NOT NULL,
    version text NOT NULL,
    tenant_id text NOT NULL,
    manifest text NOT NULL,
    sizes text NOT NULL,
    created_at text NOT NULL,
    registered_ms bigint NOT NULL,
    deleted_ms bigint DEFAULT 0 NOT NULL
);


--
-- Name: tenants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.tenants (
    id text NOT NULL,
    name text NOT NULL,
    created_ms bigint NOT NULL,
    max_sandboxes bigint,
    max_memory_mib bigint,
    max_vcpus bigint,
    max_disk_mib bigint
);


--
-- Data for Name: api_keys; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.api_keys VALUES ('hash1', 't1', 1800000000000);


--
-- Data for Name: credentials; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.credentials VALUES ('t1', 'gh', '["api.a.test"]', 'Authorization', 'Bearer x', 42);


--
-- Data for Name: events; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.events OVERRIDING SYSTEM VALUE VALUES (1, 't1', 'op-1', 'sb-a', 'operation.running', '{"n":1}', 5);
INSERT INTO public.events OVERRIDING SYSTEM VALUE VALUES (2, 't2', 'op-9', 'sb-b', 'operation.done', '{}', 1800000000000);
INSERT INTO public.events OVERRIDING SYSTEM VALUE VALUES (3, 't1', 'op-2', 'sb-f', 'operation.failed', '{"n":3}', 7);


--
-- Data for Name: meta; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.meta VALUES ('instance_id', 'inst-0123');


--
-- Data for Name: nodes; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.nodes VALUES ('n1', 'http://10.0.0.2:8091', 'http://10.0.0.2:8081', 4096, 3000, 8, 1, '["minimal"]', 'tcg', 'up', 1800000000000, 1800000000000, 'http://10.0.0.2:49983');
INSERT INTO public.nodes VALUES ('n2', 'http://10.0.0.2:8091', 'http://10.0.0.2:8081', 4096, 3000, 8, 1, '["minimal"]', 'tcg', 'lost', 1800000000000, 1800000000000, '');


--
-- Data for Name: operations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.operations VALUES ('op-1', 't1', 'sb-a', 'create', 'running', '', '', 10, 11, 'r1');
INSERT INTO public.operations VALUES ('op-2', 't1', 'sb-f', 'create', 'failed', 'internal', 'boom', 0, 1800000000000, '');


--
-- Data for Name: replicas; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.replicas VALUES ('r1', 1800000060000);


--
-- Data for Name: sandbox_ingress; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sandbox_ingress VALUES ('sb-a', '{"public":false}');


--
-- Data for Name: sandbox_network; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sandbox_network VALUES ('sb-a', '{"mode":"allowlist"}');


--
-- Data for Name: sandboxes; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sandboxes VALUES ('sb-a', 't1', 'base', 'running', '', 2, 512, '{"k":"v"}', 1000, 2000, 60, 99000, 1234, 1024, 'n1', 'pause', 0, 1, 300);
INSERT INTO public.sandboxes VALUES ('sb-b', 't2', 'minimal', 'paused', '', 1, 256, '{}', 0, 0, 0, 0, 0, 0, '', 'delete', 1, 0, 0);
INSERT INTO public.sandboxes VALUES ('sb-f', 't1', 'minimal', 'failed', 'boot failed', 1, 128, '{}', 0, 0, 0, 0, 0, 0, '', 'delete', 1, 0, 0);


--
-- Data for Name: schema_migrations; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.schema_migrations VALUES (1, 1800000000000);
INSERT INTO public.schema_migrations VALUES (2, 1800000000000);
INSERT INTO public.schema_migrations VALUES (3, 1800000000000);
INSERT INTO public.schema_migrations VALUES (4, 1800000000000);
INSERT INTO public.schema_migrations VALUES (5, 1800000000000);
INSERT INTO public.schema_migrations VALUES (6, 1800000000000);
INSERT INTO public.schema_migrations VALUES (7, 1800000000000);
INSERT INTO public.schema_migrations VALUES (8, 1800000000000);
INSERT INTO public.schema_migrations VALUES (9, 1800000000000);
INSERT INTO public.schema_migrations VALUES (10, 1800000000000);
INSERT INTO public.schema_migrations VALUES (11, 1800000000000);


--
-- Data for Name: sessions; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.sessions VALUES ('tok1', 't1', 'sb-a', 100, 900000);


--
-- Data for Name: templates; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.templates VALUES ('t-0123456789ab-py', 'v1', 't1', '{"name":"t-0123456789ab-py","version":"v1"}', '{"rootfs.ext4":1048576}', '2026-01-01T00:00:00Z', 1800000060000, 0);
INSERT INTO public.templates VALUES ('t-0123456789ab-py', 'v0', 't1', '{"name":"t-0123456789ab-py","version":"v1"}', '{"rootfs.ext4":1048576}', '2025-12-01T00:00:00Z', 1800000060000, 1800000060000);


--
-- Data for Name: tenants; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.tenants VALUES ('t2', 'two', 1800000000000, NULL, NULL, NULL, NULL);
INSERT INTO public.tenants VALUES ('t1', 'one', 1800000000000, 3, 1024, 4, 8192);


--
-- Name: events_seq_seq; Type: SEQUENCE SET; Schema: public; Owner: -
--

SELECT pg_catalog.setval('public.events_seq_seq', 3, true);


--
-- Name: api_keys api_keys_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_pkey PRIMARY KEY (key_sha256);


--
-- Name: credentials credentials_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_pkey PRIMARY KEY (tenant_id, name);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY (seq);


--
-- Name: meta meta_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.meta
    ADD CONSTRAINT meta_pkey PRIMARY KEY (key);


--
-- Name: nodes nodes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (name);


--
-- Name: operations operations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.operations
    ADD CONSTRAINT operations_pkey PRIMARY KEY (id);


--
-- Name: replicas replicas_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.replicas
    ADD CONSTRAINT replicas_pkey PRIMARY KEY (id);


--
-- Name: sandbox_ingress sandbox_ingress_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sandbox_ingress
    ADD CONSTRAINT sandbox_ingress_pkey PRIMARY KEY (sandbox_id);


--
-- Name: sandbox_network sandbox_network_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sandbox_network
    ADD CONSTRAINT sandbox_network_pkey PRIMARY KEY (sandbox_id);


--
-- Name: sandboxes sandboxes_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sandboxes
    ADD CONSTRAINT sandboxes_pkey PRIMARY KEY (id);


--
-- Name: schema_migrations schema_migrations_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (number);


--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (token_sha256);


--
-- Name: templates templates_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.templates
    ADD CONSTRAINT templates_pkey PRIMARY KEY (name, version);


--
-- Name: tenants tenants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.tenants
    ADD CONSTRAINT tenants_pkey PRIMARY KEY (id);


--
-- Name: events_operation; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_operation ON public.events USING btree (operation_id, seq);


--
-- Name: events_tenant; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_tenant ON public.events USING btree (tenant_id, seq);


--
-- Name: sandboxes_node; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sandboxes_node ON public.sandboxes USING btree (node, state);


--
-- Name: sandboxes_state; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sandboxes_state ON public.sandboxes USING btree (state);


--
-- Name: sandboxes_tenant; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sandboxes_tenant ON public.sandboxes USING btree (tenant_id, id);


--
-- Name: sessions_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sessions_expiry ON public.sessions USING btree (expires_ms);


--
-- Name: sessions_sandbox; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX sessions_sandbox ON public.sessions USING btree (sandbox_id);


--
-- Name: api_keys api_keys_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.api_keys
    ADD CONSTRAINT api_keys_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: credentials credentials_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.credentials
    ADD CONSTRAINT credentials_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: operations operations_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.operations
    ADD CONSTRAINT operations_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: sandboxes sandboxes_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sandboxes
    ADD CONSTRAINT sandboxes_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- Name: sessions sessions_sandbox_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_sandbox_id_fkey FOREIGN KEY (sandbox_id) REFERENCES public.sandboxes(id);


--
-- Name: sessions sessions_tenant_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES public.tenants(id);


--
-- PostgreSQL database dump complete
--


